"""CUDA's spelling of tensor copies (``tma_load``, :mod:`cuvil_tir.ops.tma`, sm_90+):
``cp.async.bulk.tensor.2d`` through a ``CUtensorMap`` kernel parameter.

* :func:`tma_coordinates` (a pass before the buffers are flattened) appends to each
  call the box corner and the source tensor's dimensions;
* the kernel printer gives each distinct (tensor, box, swizzle) one parameter ``const
  __grid_constant__ cvl_tmap`` (the driver's 128-byte, 64-byte aligned
  ``CUtensorMap``) and prints the copy as ``cvl_tma_load_2d(&dst, &map, col, row,
  &bar)``; the kernel's :class:`TensorMap` list says how to encode each;
* the host program encodes them before the launch through the device table's
  ``encode_tiled``, which has ``cuTensorMapEncodeTiled``'s signature: the driver's own
  function on a GPU, a recorder in tests (:class:`targets.cuda.launcher.Recorder`).
  The arguments (:meth:`TensorMap.encoding`): the element type, rank 2, the buffer's
  address, its dimensions and row stride in bytes (innermost first), the box, element
  strides 1, no interleave, the swizzle the shared destination was given by
  ``transform_layout`` (none, or 32/64/128-byte: the XOR of 16-byte chunks by the
  row's index that :func:`swizzle_mode` recognises), L2 promotion of 128 bytes and
  zero fill.

Example::

    >>> from cuvil_tir.swizzle import Swizzle
    >>> swizzle_mode(Swizzle(3, 3, 0), "float16", 64)
    3
"""

from __future__ import annotations

from dataclasses import dataclass

from cuvil_tir import dtype as D
from cuvil_tir.errors import CodegenError, CuvilError, LoweringError
from cuvil_tir.expr import Call, IntImm
from cuvil_tir.ops.tma import PLACED_ARGS, TMA_OP, WRITTEN_ARGS, tma_parts
from cuvil_tir.swizzle import Swizzle
from cuvil_tir.visitor import Mutator, post_order_visit

from .mbarrier import MBARRIER_HELPER

#: ``CUtensorMapDataType`` of each element type (fp8: its bytes)
DATA_TYPES = {"uint8": 0, "int8": 0, "float8_e4m3fn": 0, "float8_e5m2": 0, "uint16": 1,
              "int16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5,
              "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
#: ``CUtensorMapSwizzle``: none, then by the bytes of a swizzled row
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}
#: ``CU_TENSOR_MAP_L2_PROMOTION_L2_128B``
L2_PROMOTION = 2
#: the C type of a tensor-map parameter
TMAP_TYPE = "cvl_tmap"

_HELPER = r"""struct __align__(64) cvl_tmap { unsigned long long opaque[16]; };
__device__ __forceinline__ void cvl_tma_load_2d(void* dst, const cvl_tmap* map, int c0,
                                                int c1, uint64_t* bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];\n"
               :: "r"(cvl_smem(dst)), "l"((unsigned long long)map), "r"(c0), "r"(c1),
                  "r"(cvl_smem(bar)) : "memory");
}
"""


def swizzle_mode(sw: Swizzle | None, dtype: str, cols: int) -> int:
    """The ``CUtensorMapSwizzle`` that lays a box with rows of ``cols`` ``dtype``
    elements out as ``sw`` does; a ``CodegenError`` when the tensor engine has none.

    Example::

        >>> swizzle_mode(None, "float32", 8), swizzle_mode(Swizzle(2, 2, 1), "float32", 16)
        (0, 2)
    """
    if sw is None:
        return 0
    row = cols * D.bits(dtype) // 8
    chunk = 128 // D.bits(dtype)            # 16 bytes
    # the engine XORs the 16-byte chunks of a row by the bits of the row's index
    # above those a 128-byte line holds (row bytes 128/64/32: 8/4/2 chunks)
    want = {128: Swizzle(3, chunk.bit_length() - 1, 0),
            64: Swizzle(2, chunk.bit_length() - 1, 1),
            32: Swizzle(1, chunk.bit_length() - 1, 2)}.get(row)
    if want != sw:
        raise CodegenError(f"cuda codegen: tma_load writes rows of {row} bytes through "
                           f"{sw}; the tensor engine's swizzles are the 32-, 64- and "
                           f"128-byte ones (rows of that many bytes: {want} here). Use a "
                           "box row of 32, 64 or 128 bytes and its swizzle")
    return SWIZZLE_MODES[row]


def tma_coordinates(func):
    """Append to each ``tma_load`` its box corner and its source's dimensions (before
    the buffers are flattened, which forgets both); refuse a destination whose rows
    are not the box's.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> tma_coordinates(f) is f
        True
    """
    class _Place(Mutator):
        def visit_Call(self, e):
            e = self.generic_visit(e)
            if getattr(e, "op", None) != TMA_OP or len(e.args) != WRITTEN_ARGS:
                return e
            try:
                p = tma_parts(e)
            except CuvilError as err:
                raise LoweringError(f"{func.name}: {err.message}") from None
            dshape = p.dst.buffer.shape
            last = dshape[-1]
            if len(dshape) > 1 and not (isinstance(last, IntImm) and last.value == p.box[1]):
                raise LoweringError(f"{func.name}: tma_load writes rows of {p.box[1]} "
                                    f"elements one after another; {p.dst.buffer.name}'s "
                                    f"rows hold {last}: give it rows of the box's width")
            return Call(e.dtype, e.op, tuple(e.args) + tuple(p.src.indices)
                        + tuple(p.src.buffer.shape))
    body = _Place().visit(func.body)
    return func if body is func.body else func.with_body(body)


@dataclass(frozen=True)
class TensorMap:
    """One ``CUtensorMap`` parameter of a kernel: its C name, the index of its
    tensor among the kernel's parameters, the element type, the tensor's dimensions
    (outermost first, expressions of the kernel's parameters), the box and the
    swizzle mode.

    Example::

        >>> TensorMap("m", 0, "float16", (128, 256), (64, 64), 3).encoding(0x1000)
        (6, 2, 4096, (256, 128), (512,), (64, 64), (1, 1), 0, 3, 2, 0)
    """

    name: str
    param: int
    dtype: str
    dims: tuple
    box: tuple
    swizzle: int

    def encoding(self, address: int, dims: tuple | None = None) -> tuple:
        """``cuTensorMapEncodeTiled``'s arguments after the map (innermost dimension
        first), for the tensor at ``address`` with ``dims`` (integers; default: the
        constant ``self.dims``)."""
        rows, cols = dims if dims is not None else self.dims
        elem = D.bits(self.dtype) // 8
        return (DATA_TYPES[self.dtype], 2, address, (cols, rows), (cols * elem,),
                (self.box[1], self.box[0]), (1, 1), 0, self.swizzle, L2_PROMOTION, 0)


def _tma_text(p, e) -> str:
    try:
        parts = tma_parts(e)
    except CuvilError as err:
        raise CodegenError(f"cuda codegen: {err.message}") from None
    if parts.dims is None:
        raise CodegenError("cuda codegen: a tma_load the target did not place (its "
                           "tma_coordinates pass did not run)")
    src, dt = parts.src.buffer, parts.src.buffer.dtype
    if dt not in DATA_TYPES:
        raise CodegenError(f"cuda codegen: tma_load of {dt}, which tensor maps do not "
                           f"hold ({', '.join(DATA_TYPES)})")
    packed = e.args[parts.swizzle_arg].value if parts.swizzle_arg else 0
    mode = swizzle_mode(Swizzle.unpack(packed), dt, parts.box[1])
    params = [x for x in p.func.params]
    index = next((k for k, x in enumerate(params) if x is src), None)
    if index is None:
        raise CodegenError(f"cuda codegen: tma_load reads {src.name}, which is not a "
                           f"parameter of kernel {p.name}")
    dims = tuple(parts.dims)
    for d in dims:
        if isinstance(d, IntImm) and d.value >= 1 << 32:
            raise CodegenError(f"cuda codegen: tma_load of {src.name}: a tensor map's "
                               f"dimensions are below 2**32, found {d.value}")
    row = dims[1]
    if isinstance(row, IntImm) and row.value * D.bits(dt) // 8 % 16:
        raise CodegenError(f"cuda codegen: tma_load of {src.name}: its rows of {row.value} "
                           f"{dt} elements are not a multiple of 16 bytes apart, which a "
                           "tensor map needs: pad the rows")
    key = (src.name, parts.box, mode, tuple(str(d) for d in dims))
    maps = p.tensor_maps
    tm = maps.get(key)
    if tm is None:
        tm = TensorMap(f"cvl_tmap_{src.name}_{len(maps)}", index, dt, dims, parts.box, mode)
        maps[key] = tm
    p.use_helper("cvl_mbarrier", MBARRIER_HELPER)
    p.use_helper("cvl_tma", _HELPER)
    p.alignment[src.name] = max(p.alignment.get(src.name, 0), 16)
    r, c = (p.bare(x) for x in parts.corner)
    return (f"cvl_tma_load_2d(&{p.access(parts.dst.buffer, parts.dst.indices)}, "
            f"&{tm.name}, {c}, {r}, &{p.access(parts.bar.buffer, parts.bar.indices)})")


def box_alignment(buf, body) -> int:
    """The alignment in bytes the shared buffer ``buf`` needs as a ``tma_load``
    destination in ``body``: 1024 when swizzled (the engine swizzles on address bits),
    128 otherwise, 0 when no copy writes it.

    Example::

        >>> box_alignment(None, None)
        0
    """
    need = [0]

    def look(n):
        if getattr(n, "op", None) == TMA_OP and getattr(n.args[0], "buffer", None) is buf:
            swizzled = len(n.args) > PLACED_ARGS and n.args[PLACED_ARGS].value
            need.append(1024 if swizzled else 128)
    if body is not None:
        post_order_visit(body, look)
    return max(need)


#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {TMA_OP: _tma_text}

__all__ = ["DATA_TYPES", "L2_PROMOTION", "SPELLINGS", "SWIZZLE_MODES", "TMAP_TYPE",
           "TensorMap", "box_alignment", "swizzle_mode", "tma_coordinates"]
