"""CUDA's spelling of bulk copies and mbarriers (:mod:`cuvil_tir.ops.mbarrier`,
sm_90+): ``cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes`` (the
TMA unit's plain copy), ``mbarrier.init`` (then ``fence.mbarrier_init`` so the copy
engine sees it), ``mbarrier.arrive(.expect_tx)`` and a ``mbarrier.try_wait.parity``
loop, each a small inline-PTX helper the printer emits once per source.

Example::

    >>> "mbarrier.try_wait.parity" in MBARRIER_HELPER
    True
"""

from __future__ import annotations

import re

from cuvil_tir.errors import LoweringError
from cuvil_tir.ops.tma import TMA_OP
from cuvil_tir.ops.mbarrier import ARRIVE_OP, BULK_OP, INIT_OP, WAIT_OP, bulk_parts
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.visitor import post_order_visit

from .asynccopy import global_to_shared
from .setmaxnreg import SETMAXNREG_OP
from .wgmma import WGMMA_OP

MBARRIER_HELPER = r"""__device__ __forceinline__ unsigned cvl_smem(const void* p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void cvl_mbar_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n"
               "fence.mbarrier_init.release.cluster;\n" :: "r"(cvl_smem(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void cvl_mbar_arrive(uint64_t* bar, int tx) {
  if (tx) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                 :: "r"(cvl_smem(bar)), "r"(tx) : "memory");
  } else {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(cvl_smem(bar))
                 : "memory");
  }
}
__device__ __forceinline__ void cvl_mbar_wait(uint64_t* bar, int parity) {
  asm volatile("{\n.reg .pred done;\nwait:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra wait;\n}\n" :: "r"(cvl_smem(bar)), "r"(parity) : "memory");
}
__device__ __forceinline__ void cvl_bulk_copy(void* dst, const void* src, int bytes,
                                              uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
               "[%0], [%1], %2, [%3];\n"
               :: "r"(cvl_smem(dst)), "l"(src), "r"(bytes), "r"(cvl_smem(bar)) : "memory");
}
"""


def check_hopper_ops(func):
    """Refuse bulk copies, tensor copies and mbarriers in a build for an architecture
    before sm_90, and ``wgmma`` and ``setmaxnreg`` in one for other than sm_90a (their
    PTX does not exist there).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> check_hopper_ops(f) is f
        True
    """
    target = PassContext.current().target
    arch = str(target.options.get("arch", "sm_80")) if target is not None else "sm_80"
    found = []
    wgmma = (WGMMA_OP, "cuda.wgmma_async", SETMAXNREG_OP)
    post_order_visit(func.body, lambda n: found.append(n.op) if getattr(n, "op", None)
                     in SPELLINGS or getattr(n, "op", None) in (*wgmma, TMA_OP) else None)
    # wgmma exists on sm_90a only (the architecture-specific features)
    need = "sm_90a" if set(wgmma) & set(found) else "sm_90"
    if found and (int(re.sub(r"\D", "", arch) or 0) < 90 or need == "sm_90a"
                  and not arch.endswith("a")):
        raise LoweringError(f"{func.name}: {found[0]} needs {need} (Hopper's bulk and "
                            "tensor copies, mbarriers and warpgroup tensor cores); the "
                            f"target is {arch}: "
                            "build for Target('cuda', arch='sm_90a')")
    return func


def _bar(p, e) -> str:
    return f"&{p.access(e.buffer, e.indices)}"


def _bulk(p, e) -> str:
    dst, src, n, bar = global_to_shared(e, bulk_parts, "a bulk copy")
    p.use_helper("cvl_mbarrier", MBARRIER_HELPER)
    p.alignment[src.buffer.name] = max(p.alignment.get(src.buffer.name, 0), 16)
    return (f"cvl_bulk_copy(&{p.access(dst.buffer, dst.indices)}, "
            f"&{p.access(src.buffer, src.indices)}, {n}, {_bar(p, bar)})")


def _call(name):
    def spell(p, e) -> str:
        p.use_helper("cvl_mbarrier", MBARRIER_HELPER)
        return f"{name}({_bar(p, e.args[0])}, {p.bare(e.args[1])})"
    return spell


#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {BULK_OP: _bulk, INIT_OP: _call("cvl_mbar_init"),
             ARRIVE_OP: _call("cvl_mbar_arrive"), WAIT_OP: _call("cvl_mbar_wait")}

__all__ = ["MBARRIER_HELPER", "SPELLINGS", "check_hopper_ops"]
