"""``access_ptr``: a pointer to a flat range of a buffer's elements.

``Call("handle", "access_ptr", (BufferRegion.full(A), offset, extent, StringImm(mask)))``
is the address of element ``offset`` of ``A`` in row-major (flat) order; the access
covers the ``extent`` elements from there, and ``mask`` (``"r"``, ``"w"`` or ``"rw"``)
says whether the code it is handed to reads them, writes them or both.  It is how
TVMScript's ``T.tvm_access_ptr(T.type_annotation(dtype), A.data, offset, extent, mask)``
and ``A.access_ptr(mask, offset=..., extent=...)`` read when the range is not a
rectangle of a multi-dimensional buffer, and what ``T.evaluate(A.access_ptr("r"))``
(an opaque access marker) holds.

Semantics: evaluating it has no effect (``T.evaluate`` of one does nothing at run
time); passed to ``T.call_extern`` it is the address.  Analyses treat it as an opaque
access of the whole buffer (the flat range need not be a box of ``A``'s dimensions).

Example::

    >>> import cuvil_tir as T
    >>> A = T.decl_buffer((4, 8), "float16", "A")
    >>> p = access_ptr(A, 8, 16, "r")
    >>> p.dtype, p.op, [str(a) for a in p.args]
    ('handle', 'access_ptr', ['A[0:4, 0:8]', '8', '16', '"r"'])
    >>> access_ptr_parts(p)[3]
    'r'
"""

from __future__ import annotations

from ..errors import DTypeError
from . import OpDef, _string_arg, register_op
from ..expr import Call, StringImm, as_expr
from ..stmt import BufferRegion

#: the op's name in ``Call.op``
ACCESS_PTR = "access_ptr"
#: TVMScript's integer masks (``T.tvm_access_ptr(..., 1)``) and their letters
MASKS = {1: "r", 2: "w", 3: "rw"}
# what the code handed the pointer does with the range (reads and writes: opaque)
_EFFECT = {"r": "reads", "w": "writes", "rw": "opaque"}

# arity -1: not one of the T.<op>(x) intrinsics (the printer and parser spell it as
# TVMScript does, T.tvm_access_ptr); access_ptr() builds it with its four arguments
register_op(OpDef(ACCESS_PTR, -1, "any", effect="opaque",
                  effect_of=lambda call: _EFFECT.get(_string_arg(call, 3, "rw"), "opaque"),
                  doc="pointer to the flat elements [offset, offset + extent) of a "
                      "buffer; args: the buffer's whole region, offset, extent, mask"))


def access_ptr(buffer, offset, extent, mask: str = "rw"):
    """The ``access_ptr`` call of ``buffer``'s flat elements ``[offset, offset +
    extent)``; ``mask`` is ``"r"``, ``"w"``, ``"rw"`` or TVMScript's ``1``/``2``/``3``.

    Example::

        >>> import cuvil_tir as T
        >>> B = T.decl_buffer((16,), "int8", "B")
        >>> access_ptr(B, 0, 16, 3).args[3].value
        'rw'
    """
    mask = MASKS.get(mask, mask) if isinstance(mask, int) else mask
    if mask not in MASKS.values():
        raise DTypeError(f"access_ptr of {buffer.name}: the access mask is 'r', 'w' or "
                         f"'rw' (TVMScript: 1, 2 or 3), found {mask!r}")
    off, ext = as_expr(offset, "int32"), as_expr(extent, "int32")
    for what, e in (("offset", off), ("extent", ext)):
        if e.dtype not in ("int32", "int64") or e.lanes != 1:
            raise DTypeError(f"access_ptr of {buffer.name}: the {what} must be a scalar "
                             f"int32 or int64, found {e.dtype}")
    return Call("handle", ACCESS_PTR, (BufferRegion.full(buffer), off, ext, StringImm(mask)))


def is_access_ptr(e) -> bool:
    """True for an ``access_ptr`` call.

    Example::

        >>> import cuvil_tir as T
        >>> is_access_ptr(T.const(1))
        False
    """
    return getattr(e, "op", None) == ACCESS_PTR


def access_ptr_parts(e) -> tuple:
    """``(buffer, offset, extent, mask)`` of an ``access_ptr`` call.

    Example::

        >>> import cuvil_tir as T
        >>> A = T.decl_buffer((8,), "float32", "A")
        >>> access_ptr_parts(access_ptr(A, 2, 4, "w"))[0].name
        'A'
    """
    region, off, ext, mask = e.args
    return region.buffer, off, ext, mask.value


__all__ = ["ACCESS_PTR", "MASKS", "access_ptr", "is_access_ptr", "access_ptr_parts"]
