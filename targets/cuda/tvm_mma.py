"""TVM's ``mma.sync`` tensor intrinsics in Cuvil: ``ldmatrix`` into ``warp`` buffers laid
out as TVM lays them out, the ``mma`` step, the fill and the store, under TVM's names.

TVM's ``mma_schedule`` (``python/tvm/testing/tir.py``) stages A and B tiles in
``warp`` buffers, lays them out with ``transform_layout`` through TVM's index maps
(:func:`layout_16x16`: a 16 x 16 tile's element ``(i, j)`` is register ``local_id``
of lane ``thread_id``) and tensorizes five blocks with the intrinsics of
``python/tvm/tir/tensor_intrin/cuda.py``.  The names registered here, each with
TVM's ``desc`` (a ``[32, local_size]`` ``warp`` tile indexed by the map) and Cuvil's
op as ``impl``, so such a schedule ports line by line:

* ``mma_ldmatrix_{f16,i8}_{a,b}[_trans][_dyn]`` (:data:`LDMATRIX_OP`): a 16 x 16
  (float16) or 16 x 32 / 32 x 16 (int8) tile of shared memory into a warp tile,
  ``ldmatrix.x4`` (``.trans`` where TVM uses it; int8 B as ``[K, N]`` by 16 loads per
  lane, as TVM's codegen does);
* ``mma_f16f16f32[_trans_a][_trans_b]``, ``mma_i8i8i32[_trans_b]`` (:data:`MMA_OP`):
  ``C[16, 16] += A @ B`` on warp tiles, two ``mma.sync.m16n8k16`` (``m16n8k32``);
* ``mma_fill_16x16_{f32,i32}``, ``mma_store_16x16_{f32,i32}_global_`` and
  ``mma_store_16x16_f32_shared_dyn_`` (:data:`FILL_OP`, :data:`STORE_OP`).

The names TVM has that Cuvil cannot back (float16 accumulators, float8 inputs, TVM's
``_simple_`` stores) are declined: ``TensorIntrin.get`` says why with a coded error
(``allow_missing=True`` gives None, as in TVM).

What a warp tile holds is TVM's ``desc``: the interpreter computes each op on the
tiles in that layout.  On the GPU, ``ldmatrix`` leaves the registers in the
layout ``mma.sync`` reads (the same as the desc's for A, for C and for int8 ``[K,
N]`` B; for the other B and transposed A the hardware's, which only these ops read:
a warp buffer is refused anywhere else, :func:`~.fragments.check_fragments`).  A
warp buffer is declared per lane: lane ``l`` holds row ``l`` of every tile.

Example::

    >>> import schedules as S
    >>> {"mma_ldmatrix_f16_a", "mma_f16f16f32", "mma_fill_16x16_f32",
    ...  "mma_store_16x16_f32_global_"} <= set(S.TensorIntrin.names())
    True
    >>> layout_16x16(9, 3)
    (5, 3)
"""

from __future__ import annotations

import numpy as np

from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import CodegenError
from cuvil_tir.expr import Call, FloatImm, IntImm, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.ops import OpDef, register_op, register_spellings
from cuvil_tir.ops.gpu import Tile
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, Evaluate,
                            IterVar, Range)
from cuvil_tir.tensor_intrin import TensorIntrin

from .ldmatrix import LDSM_HELPER
from .mma import MMA_HELPER, WARP_SCOPE
from .tensorcore import register_tile_op
from .tvm_wmma import _nest

LDMATRIX_OP = "cuda.tvm_ldmatrix"
FILL_OP = "cuda.tvm_mma_fill"
STORE_OP = "cuda.tvm_mma_store"
WARP = 32


def mma_op(trans_a: bool, trans_b: bool) -> str:
    """The op of an mma step whose A (B) tile was stored transposed.

    Example::

        >>> mma_op(False, True)
        'cuda.tvm_mma_nt'
    """
    return "cuda.tvm_mma_" + "nt"[trans_a] + "nt"[trans_b]


MMA_OP = mma_op(False, False)


# TVM's register layouts: (row, column) of a stored tile -> (lane, register) -------------

def layout_16x16(i, j) -> tuple:
    """TVM's ``shared_16x16_to_ldmatrix_32x8_layout``: element ``(i, j)`` of a 16 x 16
    tile is register ``[1]`` of lane ``[0]`` (works on ints and IR expressions).

    Example::

        >>> layout_16x16(0, 9)
        (0, 5)
    """
    return 4 * (i % 8) + (j % 8) // 2, 4 * (j // 8) + (i // 8) * 2 + j % 2


def layout_16x32(i, j) -> tuple:
    """TVM's ``shared_16x32_to_ldmatrix_32x16_layout`` (int8 A, and B stored ``[N,
    K]``).

    Example::

        >>> layout_16x32(8, 17)
        (0, 13)
    """
    return 4 * (i % 8) + (j % 16) // 4, 8 * (j // 16) + (i // 8) * 4 + j % 4


def layout_32x16(i, j) -> tuple:
    """TVM's ``shared_32x16_to_ldmatrix_32x16_layout`` (int8 B stored ``[K, N]``).

    Example::

        >>> layout_32x16(17, 9)
        (4, 13)
    """
    return (i % 16) // 4 + 4 * (j % 8), 8 * (j // 8) + (i // 16) * 4 + i % 4


#: the layout of a stored tile of each shape
LAYOUTS = {(16, 16): layout_16x16, (16, 32): layout_16x32, (32, 16): layout_32x16}
#: per input dtype: (TVM's tag, the accumulator dtype, its tag, the step's depth)
INPUTS = {"float16": ("f16", "float32", "f32", 16), "int8": ("i8", "int32", "i32", 32)}
_KIND = {"float16": 0, "int8": 2}          # cvl_mma_step's kinds (targets/cuda/mma.py)


def stored_shape(dtype: str, matrix: str, trans: bool) -> tuple:
    """The shape of the shared tile an ``ldmatrix`` of ``matrix`` ("A" or "B") reads,
    as stored (``trans``: A as ``[K, M]``, B as ``[N, K]``).

    Example::

        >>> stored_shape("int8", "B", False)
        (32, 16)
    """
    k = INPUTS[dtype][3]
    rows, cols = (16, k) if matrix == "A" else (k, 16)
    return (cols, rows) if trans else (rows, cols)


def _positions(shape) -> tuple:
    """``(lanes, registers)`` index arrays of every element of a stored tile."""
    i, j = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    return LAYOUTS[shape](i, j)


def to_warp(tile: np.ndarray) -> np.ndarray:
    """A stored tile in TVM's warp layout (``[32, size // 32]``).

    Example::

        >>> t = np.arange(256).reshape(16, 16)
        >>> bool((from_warp(to_warp(t), (16, 16)) == t).all())
        True
    """
    w = np.zeros((WARP, tile.size // WARP), tile.dtype)
    w[_positions(tile.shape)] = tile
    return w


def from_warp(w: np.ndarray, shape) -> np.ndarray:
    """The stored tile of ``shape`` that the warp tile ``w`` holds.

    Example::

        >>> from_warp(np.arange(256).reshape(32, 8), (16, 16))[0, :4].tolist()
        [0, 1, 8, 9]
    """
    return w[_positions(tuple(shape))]


# the ops ---------------------------------------------------------------------------------

def _ldmatrix_tiles(args) -> tuple:
    return (Tile(0, args[3].value, args[4].value, 6 if len(args) > 6 else None),
            Tile(1, WARP, args[5].value, 5, "write"))


def _ldmatrix_reference(t):
    return lambda s, w: (to_warp(s),)


def _mma_tiles(args) -> tuple:
    la, lc = args[3], args[4]
    return (Tile(0, WARP, la.value, 3), Tile(1, WARP, la.value, 3),
            Tile(2, WARP, lc.value, 4, "readwrite"))


def _mma_reference(trans_a: bool, trans_b: bool):
    def run(a, b, c):
        wide = a.shape[1] == 16                 # int8: 16 registers of a 16 x 32 tile
        sa = (16, 32) if wide else (16, 16)
        sb = ((16, 32) if trans_b else (32, 16)) if wide else (16, 16)
        am, bm = from_warp(a, sa), from_warp(b, sb)
        am, bm = (am.T if trans_a else am), (bm.T if trans_b else bm)
        cm = from_warp(c, (16, 16))
        if c.dtype.kind == "i":          # int8 products summed in int32, wrapping as PTX
            s = cm.astype(np.int64) + am.astype(np.int64) @ bm.astype(np.int64)
            return (to_warp(((s + 2**31) % 2**32 - 2**31).astype(np.int32)),)
        return (to_warp(cm + am.astype("float32") @ bm.astype("float32")),)
    return lambda t: run


def _fill_tiles(args) -> tuple:
    return (Tile(0, WARP, args[1].value, 1, "write"),)


def _store_tiles(args) -> tuple:
    return (Tile(0, 16, 16, 3 if len(args) > 3 else None, "write"),
            Tile(1, WARP, args[2].value, 2))


register_op(OpDef(LDMATRIX_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_ldmatrix_tiles, reference=_ldmatrix_reference,
                  doc="W[32, L] = S[R, C] in TVM's warp layout (ldmatrix.x4 by the 32 "
                      "lanes of a warp)"), replace=True)
for _ta in (False, True):
    for _tb in (False, True):
        register_op(OpDef(mma_op(_ta, _tb), -1, "any", effect="opaque", collective="warp",
                          tiles=_mma_tiles, reference=_mma_reference(_ta, _tb),
                          doc="C[16, 16] += A @ B on warp tiles in TVM's layout (two "
                              "mma.sync by the 32 lanes of a warp)"), replace=True)
register_op(OpDef(FILL_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_fill_tiles, reference=lambda t: lambda c: (np.zeros_like(c),),
                  doc="C[32, L] = 0 in a warp tile"), replace=True)
register_op(OpDef(STORE_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_store_tiles,
                  reference=lambda t: lambda d, c: (from_warp(c, (16, 16)),),
                  doc="D[16, 16] = the 16 x 16 tile a warp tile holds in TVM's layout"),
            replace=True)
# the memory tile comes first: the lowering appends its leading dimension
register_tile_op(LDMATRIX_OP, 6, (("shared", "shared.dyn"),), min_arch=80)
register_tile_op(STORE_OP, 3, (("global", "shared", "shared.dyn"),))


# the intrinsics ----------------------------------------------------------------------------

def _desc(name, params, extents, kinds, store_of) -> PrimFunc:
    """A desc: a loop nest over ``extents`` around one block whose store is
    ``store_of(block vars)`` (a ``(buffer, value, indices, reads)`` tuple)."""
    loops = [Var(n) for n in "ijk"[:len(extents)]]
    vs = [Var("v" + n) for n in "ijk"[:len(extents)]]
    buf, value, idx, reads = store_of(*vs)
    pt = [BufferRegion(b, tuple(Range(x, const(1)) for x in ix)) for b, ix in reads]
    blk = Block(name, tuple(IterVar(v, Range.from_extent(e), k)
                            for v, e, k in zip(vs, extents, kinds)),
                tuple(pt), (BufferRegion(buf, tuple(Range(x, const(1)) for x in idx)),),
                BufferStore(buf, value, tuple(idx)))
    return PrimFunc(tuple(params), _nest(BlockRealize(tuple(loops), const(True), blk),
                                         list(zip(loops, extents))),
                    {"global_symbol": f"{name}_desc"})


def _impl(name, params, op, tile_params, extra) -> PrimFunc:
    z = const(0)
    call = Call("int32", op, tuple(b[z, z] for b in tile_params) +
                tuple(const(x) for x in extra))
    return PrimFunc(tuple(params), BlockRealize((), const(True),
                                                Block("root", (), (), (), Evaluate(call))),
                    {"global_symbol": f"{name}_impl"})


def ldmatrix_intrin(dtype: str, matrix: str, trans: bool, scope: str = "shared") -> tuple:
    """``(desc, impl)`` of TVM's ``mma_ldmatrix_*``: ``W[map(i, j)] = S[i, j]`` over
    the stored tile (:func:`stored_shape`), W a ``[32, L]`` warp tile.

    Example::

        >>> desc, impl = ldmatrix_intrin("float16", "A", False)
        >>> [(b.scope, tuple(x.value for x in b.shape)) for b in desc.params]
        [('warp', (32, 8)), ('shared', (16, 16))]
    """
    shape = stored_shape(dtype, matrix, trans)
    local = shape[0] * shape[1] // WARP

    def bufs():
        return (Buffer((WARP, local), dtype, "W", scope=WARP_SCOPE),
                Buffer(shape, dtype, "S", scope=scope))
    w, s = bufs()
    name = f"mma_ldmatrix_{INPUTS[dtype][0]}_{matrix.lower()}"
    desc = _desc(name, (w, s), shape, ("spatial", "spatial"),
                 lambda vi, vj: (w, s[vi, vj], LAYOUTS[shape](vi, vj), [(s, (vi, vj))]))
    iw, is_ = bufs()
    # flavour: the input kind, B, stored transposed
    flavor = _KIND[dtype] + 4 * (matrix == "B") + 8 * trans
    impl = _impl(name, (iw, is_), LDMATRIX_OP, (is_, iw), (flavor, *shape, local))
    return desc, impl


def mma_intrin(dtype: str, trans_a: bool, trans_b: bool) -> tuple:
    """``(desc, impl)`` of TVM's ``mma_{f16f16f32,i8i8i32}[_trans_a][_trans_b]``:
    ``C[mapC(i, j)] += A[mapA(i, k)] * B[mapB(k, j)]`` (each map on the tile as
    stored), C float32 or int32.

    Example::

        >>> desc, impl = mma_intrin("int8", False, True)
        >>> [tuple(x.value for x in b.shape) for b in desc.params]
        [(32, 16), (32, 16), (32, 8)]
    """
    _, acc, _, k = INPUTS[dtype]
    sa, sb = stored_shape(dtype, "A", trans_a), stored_shape(dtype, "B", trans_b)
    la = 16 * k // WARP

    def bufs():
        return (Buffer((WARP, la), dtype, "A", scope=WARP_SCOPE),
                Buffer((WARP, la), dtype, "B", scope=WARP_SCOPE),
                Buffer((WARP, 8), acc, "C", scope=WARP_SCOPE))
    a, b, c = bufs()

    def store(vi, vj, vk):
        ai = LAYOUTS[sa](*((vk, vi) if trans_a else (vi, vk)))
        bi = LAYOUTS[sb](*((vj, vk) if trans_b else (vk, vj)))
        ci = layout_16x16(vi, vj)
        value = c[ci] + a[ai].astype(acc) * b[bi].astype(acc)
        return c, value, ci, [(c, ci), (a, ai), (b, bi)]
    name = f"mma_{INPUTS[dtype][0] * 2}{INPUTS[dtype][2]}"
    desc = _desc(name, (a, b, c), (16, 16, k), ("spatial", "spatial", "reduce"), store)
    ia, ib, ic = bufs()
    return desc, _impl(name, (ia, ib, ic), mma_op(trans_a, trans_b), (ia, ib, ic), (la, 8))


def fill_intrin(acc: str) -> tuple:
    """``(desc, impl)`` of TVM's ``mma_fill_16x16_{f32,i32}``: ``C[map(i, j)] = 0``.

    Example::

        >>> desc, impl = fill_intrin("int32")
        >>> desc.params[0].scope
        'warp'
    """
    def buf():
        return Buffer((WARP, 8), acc, "C", scope=WARP_SCOPE)
    c = buf()
    zero = FloatImm(0.0, acc) if acc == "float32" else IntImm(0, acc)
    name = f"mma_fill_16x16_{acc[0]}{acc[-2:]}"
    desc = _desc(name, (c,), (16, 16), ("spatial", "spatial"),
                 lambda vi, vj: (c, zero, layout_16x16(vi, vj), []))
    ic = buf()
    return desc, _impl(name, (ic,), FILL_OP, (ic,), (8,))


def store_intrin(acc: str, scope: str = "global") -> tuple:
    """``(desc, impl)`` of TVM's ``mma_store_16x16_*``: ``D[i, j] = C[map(i, j)]``.

    Example::

        >>> desc, impl = store_intrin("float32", "shared")
        >>> [b.scope for b in desc.params]
        ['warp', 'shared']
    """
    def bufs():
        return (Buffer((WARP, 8), acc, "C", scope=WARP_SCOPE),
                Buffer((16, 16), acc, "D", scope=scope))
    c, d = bufs()
    name = f"mma_store_16x16_{acc[0]}{acc[-2:]}"
    desc = _desc(name, (c, d), (16, 16), ("spatial", "spatial"),
                 lambda vi, vj: (d, c[layout_16x16(vi, vj)], (vi, vj),
                                 [(c, layout_16x16(vi, vj))]))
    ic, id_ = bufs()
    return desc, _impl(name, (ic, id_), STORE_OP, (id_, ic), (8,))


def _tvm_names() -> dict:
    """TVM's names (``python/tvm/tir/tensor_intrin/cuda.py``) -> ``(desc, impl)``."""
    out = {}
    for dyn, scope in (("", "shared"), ("_dyn", "shared.dyn")):
        for ab in "ab":
            for tr in ("", "_trans"):
                out[f"mma_ldmatrix_f16_{ab}{tr}{dyn}"] = ldmatrix_intrin(
                    "float16", ab.upper(), bool(tr), scope)
    for ab, tr in (("a", ""), ("b", ""), ("b", "_trans")):
        out[f"mma_ldmatrix_i8_{ab}{tr}"] = ldmatrix_intrin("int8", ab.upper(), bool(tr))
    for ta in (False, True):
        for tb in (False, True):
            out["mma_f16f16f32" + "_trans_a" * ta + "_trans_b" * tb] = mma_intrin(
                "float16", ta, tb)
    out["mma_i8i8i32"] = mma_intrin("int8", False, False)
    out["mma_i8i8i32_trans_b"] = mma_intrin("int8", False, True)
    for acc, tag in (("float32", "f32"), ("int32", "i32")):
        out[f"mma_fill_16x16_{tag}"] = fill_intrin(acc)
        out[f"mma_store_16x16_{tag}_global_"] = store_intrin(acc, "global")
    out["mma_store_16x16_f32_shared_dyn_"] = store_intrin("float32", "shared.dyn")
    return out


#: TVM's names of this family that Cuvil declines, and why
DECLINED = {
    **{n: "float16 accumulators (mma.sync with .f16 C) are not backed; use the float32 "
          "ones (mma_f16f16f32, mma_fill_16x16_f32, mma_store_16x16_f32_global_)"
       for n in ("mma_f16f16f16", "mma_f16f16f16_trans_b", "mma_f16f16f16_trans_a",
                 "mma_f16f16f16_trans_a_trans_b", "mma_fill_16x16_f16",
                 "mma_store_16x16_f16_global_", "mma_store_16x16_f16_shared_dyn_simple_")},
    **{n: "float8 inputs are not backed through TVM's warp layout; Cuvil's own fp8 "
          "step is cuda.mma_fp8_* (targets/cuda/mma_fp8.py)"
       for f in ("e4m3", "e5m2")
       for n in (f"mma_ldmatrix_{f}_a", f"mma_ldmatrix_{f}_b", f"mma_ldmatrix_{f}_b_trans",
                 f"mma_{f}{f}f32", f"mma_{f}{f}f32_trans_b")},
    "mma_store_16x16_f32_shared_dyn_simple_": "TVM's element-wise variant of "
        "mma_store_16x16_f32_shared_dyn_, which Cuvil registers (use that name)",
}

TVM_NAMES = tuple(_tvm_names())
for _name, _pair in _tvm_names().items():
    TensorIntrin.register(_name, *_pair, override=True)
for _name, _why in DECLINED.items():
    TensorIntrin.decline(_name, _why)


# CUDA -------------------------------------------------------------------------------------

_HELPER = r"""// TVM's ldmatrix (targets/cuda/tvm_mma.py): F = kind (0 f16, 2 int8) + 4 (B) + 8
// (stored transposed); LD: the shared tile's row stride; w: the lane's registers
template <int F, int LD, typename T>
__device__ __forceinline__ void cvl_tvm_ldmatrix(T* w, const T* s) {
  constexpr int kind = F & 3;
  constexpr bool b = F & 4, trans = F & 8;
  constexpr int E = kind == 2 ? 16 : 8;  // elements in 16 bytes
  const int lane = threadIdx.x & 31;
  if constexpr (kind == 2 && b && !trans) {
    // int8 B as [K, N]: ldmatrix cannot transpose 8-bit elements; 16 loads per lane
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int l = 0; l < 16; ++l)
      w[l] = s[(16 * ((l & 7) >> 2) + 4 * t + (l & 3)) * LD + 8 * (l >> 3) + g];
  } else {
    const int off = trans ? LD * 8 * (lane >> 4) + LD * (lane & 7) + E * ((lane & 15) >> 3)
                          : LD * (lane & 15) + E * (lane >> 4);
    cvl_ldsm_x4<kind != 2 && (b != trans)>((uint32_t*)w, s + off);
  }
}
// C[16, 16] += A @ B on the lane's registers: two m16n8 steps, B's words 0-1 and 2-3
template <int KIND, typename T, typename Acc>
__device__ __forceinline__ void cvl_tvm_mma(const T* a, const T* b, Acc* c) {
  const uint32_t* ra = (const uint32_t*)a;
  const uint32_t* rb = (const uint32_t*)b;
  cvl_mma_step<KIND>(c, ra, rb[0], rb[1]);
  cvl_mma_step<KIND>(c + 4, ra, rb[2], rb[3]);
}
template <int L, typename Acc> __device__ __forceinline__ void cvl_tvm_fill(Acc* c) {
#pragma unroll
  for (int l = 0; l < L; ++l) c[l] = 0;
}
// D[16, 16] (rows LDD apart) from the lane's 8 accumulators
template <typename Acc>
__device__ __forceinline__ void cvl_tvm_store(const Acc* c, Acc* d, int ldd) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int l = 0; l < 8; ++l)
    d[(8 * ((l & 3) >> 1) + g) * ldd + 8 * (l >> 2) + 2 * t + (l & 1)] = c[l];
}
"""


def _helpers(p) -> None:
    p.use_helper("cvl_ldsm", LDSM_HELPER)
    p.use_helper("cvl_mma", MMA_HELPER)
    p.use_helper("cvl_tvm_mma", _HELPER)


def registers(p, load) -> str:
    """``&name[o]``: the lane's first register of the warp tile that starts at the
    flattened element ``load`` (lane ``l`` holds row ``l`` of each ``[32, L]`` tile, so
    the tile at ``32 * L * t`` is the lane's registers from ``L * t``).

    Example::

        >>> registers.__name__
        'registers'
    """
    (off,) = load.indices
    off = p.ana.simplify(off)
    if isinstance(off, IntImm):
        if off.value % WARP:
            raise CodegenError(f"cuda codegen: a warp tile of {load.buffer.name} starts at "
                               f"{off.value}, not a whole tile")
        return f"&{p.name_of(load.buffer)}[{off.value // WARP}]"
    return f"&{p.name_of(load.buffer)}[({p.bare(off)}) / {WARP}]"


def _ldmatrix_text(p, e) -> str:
    _helpers(p)
    s, w = e.args[:2]
    flavor, ld = e.args[2].value, e.args[6].value
    return (f"cvl_tvm_ldmatrix<{flavor}, {ld}>({registers(p, w)}, "
            f"&{p.access(s.buffer, s.indices)})")


def _mma_text(p, e) -> str:
    _helpers(p)
    a, b, c = e.args[:3]
    kind = _KIND[a.buffer.dtype]
    return f"cvl_tvm_mma<{kind}>({registers(p, a)}, {registers(p, b)}, {registers(p, c)})"


def _fill_text(p, e) -> str:
    _helpers(p)
    return f"cvl_tvm_fill<{e.args[1].value}>({registers(p, e.args[0])})"


def _store_text(p, e) -> str:
    _helpers(p)
    d, c = e.args[:2]
    return (f"cvl_tvm_store({registers(p, c)}, &{p.access(d.buffer, d.indices)}, "
            f"{p.bare(e.args[3])})")


register_spellings("cuda", {LDMATRIX_OP: _ldmatrix_text, FILL_OP: _fill_text,
                            STORE_OP: _store_text,
                            **{mma_op(a, b): _mma_text for a in (False, True)
                               for b in (False, True)}})

__all__ = ["DECLINED", "FILL_OP", "LAYOUTS", "LDMATRIX_OP", "MMA_OP", "STORE_OP",
           "TVM_NAMES", "fill_intrin", "from_warp", "layout_16x16", "layout_16x32",
           "layout_32x16", "ldmatrix_intrin", "mma_intrin", "mma_op", "registers",
           "store_intrin", "stored_shape", "to_warp"]
