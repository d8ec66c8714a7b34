"""``elem_offset``: where a buffer starts in the memory it is matched to (TVMScript's
``A.elem_offset``), in elements.

``Call("int32", "elem_offset", (StringImm("A"),))`` names the buffer ``A`` of the
function.  A Cuvil buffer always starts at its first element, so the value is ``0``
wherever the function runs (the interpreter and the code generators expand it to
``0``).  It matters in the ``impl`` of a tensor intrinsic written for TVM's convention
(``T.tvm_mma_sync(C.data, C.elem_offset // 256, ...)``: the whole buffer and the
tile's offset in it): ``tensorize`` replaces it by the flat offset of the matched
tile, and passes ``C.data`` as the whole buffer (see
:mod:`schedules.primitives.tensorize`).  Printed as TVMScript writes it,
``A.elem_offset``.

Example::

    >>> import cuvil_tir as T
    >>> e = elem_offset("A")
    >>> e.op, e.dtype, str(e), str(expand(*e.args))
    ('elem_offset', 'int32', 'A.elem_offset', '0')
"""

from __future__ import annotations

from . import OpDef, register_op
from ..expr import IntImm, Call, StringImm

#: the op's name in ``Call.op``
ELEM_OFFSET = "elem_offset"


def expand(name):
    """The value on every target: ``0`` (a buffer starts at its first element).

    Example::

        >>> from cuvil_tir.expr import StringImm
        >>> expand(StringImm("A")).value
        0
    """
    return IntImm(0, "int32")


# arity -1: spelled A.elem_offset by the printer and parser, not one of the math ops
register_op(OpDef(ELEM_OFFSET, -1, "any", effect="pure", expand=expand,
                  doc="the element offset of a buffer in its memory: 0, except in a "
                      "tensor intrinsic's impl, where tensorize binds it to the tile's"))


def elem_offset(buffer_name: str):
    """The ``elem_offset`` call of the buffer called ``buffer_name``.

    Example::

        >>> elem_offset("C").args[0].value
        'C'
    """
    return Call("int32", ELEM_OFFSET, (StringImm(buffer_name),))


def elem_offset_name(e) -> str | None:
    """The buffer name of an ``elem_offset`` call, else None.

    Example::

        >>> import cuvil_tir as T
        >>> elem_offset_name(elem_offset("B")), elem_offset_name(T.const(0))
        ('B', None)
    """
    if getattr(e, "op", None) == ELEM_OFFSET and len(e.args) == 1:
        return e.args[0].value
    return None


__all__ = ["ELEM_OFFSET", "elem_offset", "elem_offset_name", "expand"]
