"""CUDA's spelling of the asynchronous copies of the op registry
(:mod:`cuvil_tir.ops.async_copy`): ``cp.async`` (sm_80+).

``async_copy(dst[i], src[j], n)`` is ``cp.async.cg.shared.global`` for 16 bytes (the
copy bypasses L1) and ``cp.async.ca.shared.global`` for 4 or 8; the group ops are
``cp.async.commit_group`` and ``cp.async.wait_group n`` (``n`` a constant).  Each is
one small inline-PTX helper the printer emits once per source.

Example::

    >>> "cp.async.wait_group" in ASYNC_HELPER
    True
"""

from __future__ import annotations

from cuvil_tir.errors import CodegenError, CuvilError
from cuvil_tir.expr import IntImm
from cuvil_tir.ops.async_copy import COMMIT_OP, COPY_OP, WAIT_OP, copy_parts
from cuvil_tir.printer import to_text

ASYNC_HELPER = r"""template <int N> __device__ __forceinline__ void cvl_cp_async(void* dst, const void* src) {
  unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  if constexpr (N == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" :: "r"(s), "l"(src), "n"(N)
                 : "memory");
  }
}
__device__ __forceinline__ void cvl_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N> __device__ __forceinline__ void cvl_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
}
"""


def global_to_shared(e, parts, what: str) -> tuple:
    """``parts(e)`` (the checked operands of a copy op, destination and source first),
    refused unless the copy goes from global to shared memory.

    Example::

        >>> global_to_shared.__name__
        'global_to_shared'
    """
    try:
        out = parts(e)
    except CuvilError as err:
        raise CodegenError(f"cuda codegen: {err.message}: {to_text(e)}") from None
    dst, src = out[:2]
    if dst.buffer.scope != "shared" or src.buffer.scope != "global":
        raise CodegenError(f"cuda codegen: {what} copies global memory into shared memory; "
                           f"{to_text(e)} copies {src.buffer.scope} {src.buffer.name} into "
                           f"{dst.buffer.scope} {dst.buffer.name}")
    return out


def _copy(p, e) -> str:
    dst, src, n = global_to_shared(e, copy_parts, "cp.async")
    p.use_helper("cvl_cp_async", ASYNC_HELPER)
    if src.buffer.scope == "global":
        p.alignment[src.buffer.name] = max(p.alignment.get(src.buffer.name, 0), n)
    return (f"cvl_cp_async<{n}>(&{p.access(dst.buffer, dst.indices)}, "
            f"&{p.access(src.buffer, src.indices)})")


def _commit(p, e) -> str:
    p.use_helper("cvl_cp_async", ASYNC_HELPER)
    return "cvl_cp_async_commit()"


def _wait(p, e) -> str:
    n = e.args[0]
    if not isinstance(n, IntImm) or n.value < 0:
        raise CodegenError(f"cuda codegen: cp.async.wait_group takes a constant count >= 0, "
                           f"found {to_text(e)}")
    p.use_helper("cvl_cp_async", ASYNC_HELPER)
    return f"cvl_cp_async_wait<{n.value}>()"


#: the ``cuda`` spellings of the asynchronous-copy ops (registered by the codegen)
SPELLINGS = {COPY_OP: _copy, COMMIT_OP: _commit, WAIT_OP: _wait}

__all__ = ["ASYNC_HELPER", "SPELLINGS", "global_to_shared"]
