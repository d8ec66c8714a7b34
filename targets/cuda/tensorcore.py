"""Tensor cores: fp16 and bf16 GEMM fragments through ``nvcuda::wmma``, fp32
accumulation.

``cuda.wmma_16x16x{K}_f16f32`` and ``cuda.wmma_16x16x{K}_bf16f32`` (K = 16, 32, 64)
are tensor intrinsics for ``tensorize``: the ``desc`` is
``C[0:16, 0:16] += float(A[0:16, 0:K]) @ float(B[0:K, 0:16])`` (A, B float16 or
bfloat16 (sm_80+), C float32), the ``impl`` one warp-wide call,
``cuda.wmma_sync(A[0, 0], B[0, 0], C[0, 0], K)``: the 32 lanes of a warp load the C
tile into an accumulator fragment, run ``K / 16`` ``mma_sync`` steps on fragments of
A and B, and store C back.  The tiles may live in ``global`` or ``shared`` memory,
row-major, with row strides of a multiple of 16 bytes (padded by ``storage_align``
where the schedule asks) and 32-byte aligned tiles (so shared tiles are declared
``__align__(32)``); C may also be a ``wmma.accumulator`` fragment
(:mod:`.fragments`).

Within a kernel, the warp is the 32 lanes of ``threadIdx.x`` (a kernel using the
intrinsic must bind ``threadIdx.x`` with extent 32, e.g. for its copies into shared
memory); warps are told apart by ``threadIdx.y``/``z``.  The interpreter executes the
call once per warp, after checking that all 32 lanes pass the same tiles
(:mod:`cuvil_tir.interp.gpu`), and computes it in float32 with numpy: the op's entry
in the op registry declares its tiles and that computation.

Example::

    >>> import schedules as S
    >>> "cuda.wmma_16x16x16_f16f32" in S.TensorIntrin.names()
    True
    >>> wmma_name(32, "bfloat16")
    'cuda.wmma_16x16x32_bf16f32'
"""

from __future__ import annotations

import re

from cuvil_tir import dtype as D
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import LoweringError
from cuvil_tir.expr import BufferLoad, Call, IntImm, Var, const
from cuvil_tir.function import PrimFunc
from cuvil_tir.ops import OpDef, get_op, register_op
from cuvil_tir.ops.gpu import Tile, group_lanes, per_warp
from cuvil_tir.printer import to_text
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
                            IterVar, Range)
from cuvil_tir.transform.gpu_threads import kernels, launch_dims
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.transform.storage_align import ALIGN_KEY, aligned_strides
from cuvil_tir.visitor import Mutator, post_order_visit
from cuvil_tir.tensor_intrin import TensorIntrin

from .fragments import ACC_SCOPE, FILL_OP, STORE_OP, check_fragments, fragment_ref

WMMA_OP = "cuda.wmma_sync"
WMMA_DEPTHS = (16, 32, 64)
#: the input dtypes of the tensor-core intrinsics and their names' spelling
WMMA_INPUTS = {"float16": "f16", "bfloat16": "bf16"}


def _wmma_tiles(args) -> tuple:
    # A[16, K], B[K, 16] read, C[16, 16] read and written; after wmma_leading_dims the
    # leading dimensions are arguments 4 to 6
    k = args[3].value
    lds = (4, 5, 6) if len(args) == 7 else (None, None, None)
    return (Tile(0, 16, k, lds[0]), Tile(1, k, 16, lds[1]),
            Tile(2, 16, 16, lds[2], "readwrite"))


def _wmma_reference(t):
    return lambda a, b, c: (c + a.astype("float32") @ b.astype("float32"),)


# a warp-wide tile op: the interpreter and the GPU passes read its tiles from here
register_op(OpDef(WMMA_OP, -1, "any", effect="opaque", collective="warp",
                  tiles=_wmma_tiles, reference=_wmma_reference,
                  doc="C[16, 16] += A[16, K] @ B[K, 16] in float32 by the 32 lanes of a "
                      "warp (nvcuda::wmma)"), replace=True)

WMMA_HELPER = r"""#include <mma.h>
template <int K, typename T> __device__ __forceinline__ void cvl_wmma_sync(
    const T* a, const T* b, float* c, int lda, int ldb, int ldc) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::load_matrix_sync(fc, c, ldc, wmma::mem_row_major);
#pragma unroll
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(fa, a + k, lda);
    wmma::load_matrix_sync(fb, b + k * ldb, ldb);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(c, fc, ldc, wmma::mem_row_major);
}
"""


WMMA_MMA_HELPER = r"""template <int K, typename T> __device__ __forceinline__ void cvl_wmma_mma(
    const T* a, const T* b,
    nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>& c,
    int lda, int ldb) {
  using namespace nvcuda;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
#pragma unroll
  for (int k = 0; k < K; k += 16) {
    wmma::load_matrix_sync(fa, a + k, lda);
    wmma::load_matrix_sync(fb, b + k * ldb, ldb);
    wmma::mma_sync(c, fa, fb, c);
  }
}
"""


def _params(k: int, dtype: str, m: int = 16, n: int = 16, acc: str = "float32",
            b_transposed: bool = False):
    return (Buffer((m, k), dtype, "A"), Buffer((n, k) if b_transposed else (k, n), dtype, "B"),
            Buffer((m, n), acc, "C"))


def wmma_intrin(k: int = 16, dtype: str = "float16") -> tuple:
    """``(desc, impl)`` of the ``16 x 16 x k`` tensor-core GEMM on ``dtype`` inputs
    (float16 or bfloat16; ``k`` a multiple of 16).

    Example::

        >>> desc, impl = wmma_intrin(32)
        >>> [tuple(d.value for d in b.shape) for b in desc.params]
        [(16, 32), (32, 16), (16, 16)]
    """
    return tile_gemm_intrin(k, dtype, WMMA_OP, f"wmma_16x16x{k}_{WMMA_INPUTS[dtype]}")


def tile_gemm_intrin(k: int, dtype: str, op: str, name: str, m: int = 16, n: int = 16,
                     acc: str = "float32", b_transposed: bool = False,
                     sized: bool = False) -> tuple:
    """``(desc, impl)`` of ``C[0:m, 0:n] += acc(A[0:m, 0:k]) @ acc(B[0:k, 0:n])``
    (A and B of ``dtype``, C of ``acc``; ``b_transposed``: B is ``[n, k]`` and read
    as ``B[j, k]``) whose ``impl`` is the warp-wide call ``op(A[0, 0], B[0, 0],
    C[0, 0], k)`` (``op(..., m, n, k)`` when ``sized``: an op of several tile sizes
    takes its size whatever it is); ``name`` prefixes the functions' symbols.

    Example::

        >>> desc, impl = tile_gemm_intrin(16, "float16", WMMA_OP, "t")
        >>> impl.attr("global_symbol")
        't_impl'
    """
    A, B, C = _params(k, dtype, m, n, acc, b_transposed)
    i, j, r = Var("i"), Var("j"), Var("k")
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")

    def pt(*xs):
        return tuple(Range(x, const(1)) for x in xs)

    blk = Block("update",
                (IterVar(vi, Range.from_extent(m), "spatial"),
                 IterVar(vj, Range.from_extent(n), "spatial"),
                 IterVar(vk, Range.from_extent(k), "reduce")),
                (BufferRegion(C, pt(vi, vj)), BufferRegion(A, pt(vi, vk)),
                 BufferRegion(B, pt(vj, vk) if b_transposed else pt(vk, vj))),
                (BufferRegion(C, pt(vi, vj)),),
                BufferStore(C, C[vi, vj] + A[vi, vk].astype(acc)
                            * (B[vj, vk] if b_transposed else B[vk, vj]).astype(acc),
                            (vi, vj)))
    body = BlockRealize((i, j, r), const(True), blk)
    for v, e in ((r, k), (j, n), (i, m)):
        body = For(v, const(0), const(e), "serial", body)
    desc = PrimFunc((A, B, C), body, {"global_symbol": f"{name}_desc"})
    A2, B2, C2 = _params(k, dtype, m, n, acc, b_transposed)
    z = const(0)
    dims = (const(m), const(n), const(k)) if sized else (const(k),)
    call = Evaluate(Call("int32", op, (A2[z, z], B2[z, z], C2[z, z]) + dims))
    root = Block("root", (), (), (), call)
    impl = PrimFunc((A2, B2, C2), BlockRealize((), const(True), root),
                    {"global_symbol": f"{name}_impl"})
    return desc, impl


def wmma_name(k: int, dtype: str = "float16") -> str:
    """The registered name of the ``16 x 16 x k`` intrinsic on ``dtype`` inputs.

    Example::

        >>> wmma_name(64)
        'cuda.wmma_16x16x64_f16f32'
    """
    return f"cuda.wmma_16x16x{k}_{WMMA_INPUTS[dtype]}f32"


for _k in WMMA_DEPTHS:
    for _dt in WMMA_INPUTS:
        TensorIntrin.register(wmma_name(_k, _dt), *wmma_intrin(_k, _dt), override=True)


def is_wmma(n) -> bool:
    """Whether ``n`` is a tensor-core call.

    Example::

        >>> is_wmma(None)
        False
    """
    return isinstance(n, Call) and n.op == WMMA_OP


MEMORY = ("global", "shared")
#: per tensor-core op: its arguments before the leading dimensions are appended, and
#: the scopes each tile argument may be in
_TILE_ARGS = {WMMA_OP: (4, (MEMORY, MEMORY, MEMORY + (ACC_SCOPE,))),
              FILL_OP: (1, ((ACC_SCOPE,),)),
              STORE_OP: (2, ((ACC_SCOPE,), MEMORY))}
#: per tensor-core op: the oldest architecture that has it (sm_XY as XY)
_MIN_ARCH: dict = {}


def register_tile_op(op: str, nargs: int, scopes: tuple, min_arch: int | None = None):
    """Declare the warp-wide tile op ``op`` to :func:`wmma_leading_dims`: its ``nargs``
    arguments (the tiles first), the scopes each tile may be in, and the oldest
    architecture (``89`` for sm_89) that runs it.

    Example::

        >>> register_tile_op(WMMA_OP, 4, _TILE_ARGS[WMMA_OP][1])
    """
    _TILE_ARGS[op] = (nargs, scopes)
    if min_arch is not None:
        _MIN_ARCH[op] = min_arch


class _LeadingDims(Mutator):
    def __init__(self, func):
        self.func = func
        # storage_align pads the rows of a staged tile (against bank conflicts): the
        # leading dimension is the padded row stride flatten_buffers will give it
        self.aligns: dict = {}
        for name, ndim, axis, factor, offset in func.attr(ALIGN_KEY) or ():
            self.aligns.setdefault(name, []).append((ndim, axis, factor, offset))

    def row_stride(self, a) -> int | None:
        buf = a.buffer if isinstance(a, BufferLoad) else None
        if buf is None or len(buf.shape) < 2 or not all(isinstance(d, IntImm)
                                                        for d in buf.shape):
            return None
        # a pipeline's versions of a tile (software_pipeline_stage) lead its shape
        aligns = {axis + buf.ndim - ndim: (f, o)
                  for ndim, axis, f, o in self.aligns.get(buf.name, ())}
        ld = aligned_strides([d.value for d in buf.shape], aligns)[-2]
        # wmma's rule: a row stride of a multiple of 16 bytes (fragments: whole tiles)
        unit = 16 if per_warp(buf.scope) else 128 // D.bits(buf.dtype)
        return ld if ld % unit == 0 else None

    def visit_Call(self, e):
        e = self.generic_visit(e)
        n, scopes = _TILE_ARGS.get(getattr(e, "op", None), (None, ()))
        if len(e.args) != n:
            return e
        lds = []
        for a, ok in zip(e.args, scopes):
            ld = self.row_stride(a)
            if ld is None or a.buffer.scope not in ok:
                raise LoweringError(
                    f"tensor-core call {to_text(e)}: each tile must be a 2-D buffer in "
                    f"{' or '.join(ok)} of constant shape whose row stride is a multiple "
                    f"of 16 bytes (of 16 elements for a fragment); found {to_text(a)} "
                    "(stage the tiles with cache_read/cache_write)")
            lds.append(IntImm(ld, "int32"))
        return Call(e.dtype, e.op, tuple(e.args) + tuple(lds))


def _wmma_calls(s) -> list:
    out = []
    post_order_visit(s, lambda n: out.append(n) if getattr(n, "op", None) in _TILE_ARGS
                     else None)
    return out


def wmma_leading_dims(func):
    """Append each tile's leading dimension to tensor-core calls (before flattening
    loses the rows' length).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> wmma_leading_dims(f) is f
        True
    """
    check_fragments(func)
    body = _LeadingDims(func).visit(func.body)
    if body is func.body:
        return func
    _check_arch(func, body)
    for k in kernels(body):
        calls = _wmma_calls(k)
        lanes = launch_dims(k).get("threadIdx.x", IntImm(1, "int32"))
        # the threads issuing one call together: a warp, or a warpgroup (wgmma)
        want = max([group_lanes(get_op(c.op).collective) for c in calls] or [32])
        if calls and not (isinstance(lanes, IntImm) and lanes.value == want):
            raise LoweringError(f"a kernel of {func.name} calls tensor cores with "
                                f"threadIdx.x = {lanes}; the {want} lanes of a "
                                f"{'warp' if want == 32 else 'warpgroup'} are threadIdx.x: "
                                f"bind a loop of extent {want} to it (the copies into "
                                "shared memory) and the groups to threadIdx.y/z")
    return func.with_body(body)


def _check_arch(func, body) -> None:
    target = PassContext.current().target
    arch = str(target.options.get("arch", "sm_80")) if target is not None else "sm_80"
    have = int(re.sub(r"\D", "", arch) or 0)
    for call in _wmma_calls(body):
        need = _MIN_ARCH.get(call.op)
        if need is not None and have < need:
            raise LoweringError(f"{func.name}: {call.op} needs sm_{need} or newer; the "
                                f"target is {arch}: build for Target('cuda', "
                                f"arch='sm_90')")


def wmma_text(printer, e) -> str:
    """The CUDA call of a lowered ``cuda.wmma_sync`` (used by the kernel printer).

    Example::

        >>> wmma_text.__name__
        'wmma_text'
    """
    a, b = (f"&{printer.access(x.buffer, x.indices)}" for x in e.args[:2])
    k, lda, ldb = (printer.bare(x) for x in e.args[3:6])
    elem = printer.mem_type(e.args[0].buffer.dtype)
    if e.args[2].buffer.scope == ACC_SCOPE:
        # the accumulator stays in its fragment: no load or store of C
        printer.use_helper("cuda_mma_h", "#include <mma.h>")
        printer.use_helper("cvl_wmma_mma", WMMA_MMA_HELPER)
        frag = fragment_ref(printer, e.args[2], e.args[6])
        return f"cvl_wmma_mma<{k}, {elem}>({a}, {b}, {frag}, {lda}, {ldb})"
    printer.use_helper("cvl_wmma_sync", WMMA_HELPER)
    c = f"&{printer.access(e.args[2].buffer, e.args[2].indices)}"
    return f"cvl_wmma_sync<{k}, {elem}>({a}, {b}, {c}, {lda}, {ldb}, {printer.bare(e.args[6])})"


__all__ = ["MEMORY", "WMMA_OP", "is_wmma", "register_tile_op", "tile_gemm_intrin",
           "wmma_intrin", "wmma_leading_dims", "wmma_name", "wmma_text"]
