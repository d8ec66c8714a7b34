"""CUDA's spelling of thread-block clusters (:mod:`cuvil_tir.ops.cluster`, sm_90+):
the kernel attribute ``__cluster_dims__(cx, cy, cz)`` from the ``cluster``
annotations of its grid loops (so a plain launch makes clusters), ``cluster_sync()``
as ``barrier.cluster.arrive`` + ``barrier.cluster.wait`` (release / acquire: shared
writes before it are seen by DSMEM reads after it; ``cluster_arrive()`` and
``cluster_wait()`` each half), and ``dsmem_load(S[i], rank)``
as ``mapa.shared::cluster`` (the address of ``S[i]`` in the block of that rank)
then ``ld.shared::cluster``, a small inline-PTX helper emitted once per source.

Example::

    >>> "mapa.shared::cluster.u32" in dsmem_helper("float32")
    True
"""

from __future__ import annotations

import re

from cuvil_tir.errors import CodegenError, LoweringError
from cuvil_tir.ops.cluster import (ARRIVE_OP, DSMEM_OP, SYNC_OP, WAIT_OP, cluster_shape,
                                   dsmem_parts)
from cuvil_tir.transform.gpu_threads import kernels
from cuvil_tir.transform.pass_manager import PassContext
from cuvil_tir.visitor import post_order_visit

#: dtype -> (C type, PTX type, inline-asm constraint) of a DSMEM load
_DSMEM_TYPES = {"float32": ("float", "f32", "f"), "int32": ("int", "s32", "r"),
                "uint32": ("unsigned", "u32", "r"), "float64": ("double", "f64", "d"),
                "int64": ("long long", "s64", "l")}


def dsmem_helper(dtype: str) -> str:
    """The device function reading one ``dtype`` of another block's shared memory.

    Example::

        >>> dsmem_helper("int32").splitlines()[0].split("(")[0]
        '__device__ __forceinline__ int cvl_dsmem_ld_int32'
    """
    c, ptx, con = _DSMEM_TYPES[dtype]
    return (f"__device__ __forceinline__ {c} cvl_dsmem_ld_{dtype}(const {c}* p, "
            "unsigned rank) {\n"
            "  unsigned local = (unsigned)__cvta_generic_to_shared(p), remote;\n"
            '  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) '
            ': "r"(local), "r"(rank));\n'
            f"  {c} v;\n"
            f'  asm volatile("ld.shared::cluster.{ptx} %0, [%1];" : "={con}"(v) '
            ': "r"(remote) : "memory");\n'
            "  return v;\n}\n")


def _dsmem(p, e) -> str:
    elem, rank = dsmem_parts(e)
    if e.dtype not in _DSMEM_TYPES:
        raise CodegenError(f"cuda codegen: dsmem_load of {e.dtype} in {e}; DSMEM loads "
                           f"of {', '.join(_DSMEM_TYPES)} are spelled: keep the shared "
                           "statistics in one of them")
    p.use_helper(f"cvl_dsmem_{e.dtype}", dsmem_helper(e.dtype))
    return (f"cvl_dsmem_ld_{e.dtype}(&{p.access(elem.buffer, elem.indices)}, "
            f"(unsigned)({p.bare(rank)}))")


def _half(p, what: str, sem: str) -> str:
    # a function call: the printer writes a call evaluated for effect as (void)call
    p.use_helper(f"cvl_cluster_{what}",
                 f"__device__ __forceinline__ void cvl_cluster_{what}() {{\n"
                 f'  asm volatile("barrier.cluster.{what}.{sem};" ::: "memory");\n}}\n')
    return f"cvl_cluster_{what}()"


def cluster_attribute(kernel) -> str:
    """``__cluster_dims__(cx, cy, cz) `` for a kernel with clusters, else ``""``.

    Example::

        >>> cluster_attribute(None)
        ''
    """
    shape = cluster_shape(kernel)
    return "" if shape is None else "__cluster_dims__({}, {}, {}) ".format(*shape)


def check_clusters(func):
    """Refuse clusters (a ``cluster`` annotation, ``cluster_sync``, ``dsmem_load``) in
    a build for an architecture before sm_90, and check each kernel's cluster shape
    (:func:`cuvil_tir.ops.cluster.cluster_shape`).

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> check_clusters(f) is f
        True
    """
    target = PassContext.current().target
    arch = str(target.options.get("arch", "sm_80")) if target is not None else "sm_80"
    ops = []
    post_order_visit(func.body, lambda n: ops.append(n.op) if getattr(n, "op", None)
                     in (SYNC_OP, ARRIVE_OP, WAIT_OP, DSMEM_OP) else None)
    found = [f"a cluster of {s} blocks" for s in map(cluster_shape, kernels(func.body))
             if s is not None] + ops
    if found and int(re.sub(r"\D", "", arch) or 0) < 90:
        raise LoweringError(f"{func.name}: {found[0]} needs sm_90 or newer (Hopper's "
                            f"thread-block clusters); the target is {arch}: build for "
                            "Target('cuda', arch='sm_90'), or drop the cluster annotation "
                            "and the cluster ops (split the work over separate kernels)")
    return func


#: the ``cuda`` spellings of the ops (registered by the codegen)
SPELLINGS = {SYNC_OP: 'asm volatile("barrier.cluster.arrive.release;\\n\\t"'
                      '"barrier.cluster.wait.acquire;" ::: "memory")',
             ARRIVE_OP: lambda p, e: _half(p, "arrive", "release"),
             WAIT_OP: lambda p, e: _half(p, "wait", "acquire"),
             DSMEM_OP: _dsmem}

__all__ = ["SPELLINGS", "check_clusters", "cluster_attribute", "dsmem_helper"]
