"""Shared pieces of the CUDA tests: workloads built and scheduled once, their
sources compiled by nvcc in one call per architecture, GPU availability."""

from __future__ import annotations

import functools
import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from targets.toolkit import cuda_recipes as recipes
from targets.cuda.codegen import combine
from cuvil_tir.stmt import Evaluate
from cuvil_tir.visitor import Mutator
from targets.cuda.nvcc import nvcc_available, nvcc_ptx, resource_usage, sass

ARCHS = ("sm_80", "sm_90")


def gpu_reason() -> str | None:
    """Why GPU launches cannot run here (None when they can)."""
    try:
        import cupy
    except ImportError:
        return "no NVIDIA GPU here: cupy is not installed (pip install 'cuvil[cuda]')"
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            return "no NVIDIA GPU here: cupy sees 0 devices"
    except Exception as err:  # noqa: BLE001 - any driver failure means no GPU
        return f"no NVIDIA GPU here: {err}"
    return None


needs_gpu = pytest.mark.skipif(gpu_reason() is not None, reason=str(gpu_reason()))


def compile_all(mods) -> dict:
    """PTX per architecture of the kernels of many built modules, in one nvcc call
    each (kernels are apart by their build names)."""
    if not nvcc_available():
        pytest.fail("nvcc is on every machine of this project (CI too); it is missing")
    text = combine([m.runtime.program for m in mods])
    return {arch: nvcc_ptx(text, arch) for arch in ARCHS}


def sch_for(func) -> S.Schedule:
    """A schedule of ``func``."""
    return S.Schedule(func)


def build(sch, name: str):
    """``targets.build(sch, "cuda", name=name)`` and the lowered IR."""
    mod = targets.build(sch, targets.Target("cuda"), name=name)
    return mod, mod.lowered


@functools.lru_cache(maxsize=None)
def gemm_case(m=32, n=32, k=16, vector=4, dtype="float32"):
    """A tiled shared-memory GEMM: (module, A, B) with random inputs."""
    A = T.placeholder((m, k), dtype, name="A")
    B = T.placeholder((k, n), dtype, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r] * B[r, j], axis=r), name="C")
    sch = sch_for(T.create_prim_func([A, B, C]))
    recipes.gemm(sch, bm=16, bn=16, bk=8, tm=2, tn=2, vector=vector)
    return build(sch, f"gemm{m}x{n}x{k}v{vector}")


def rand(shape, dtype="float32", seed=0):
    """Random test data."""
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


class _DropOps(Mutator):
    def __init__(self, op, name_part):
        self.op, self.name_part = op, name_part

    def visit_Evaluate(self, s):
        v = s.value
        if getattr(v, "op", None) == self.op and self.name_part in v.args[0].buffer.name:
            return Evaluate(T.const(0))
        return s


def without_ops(lowered, op: str, name_part: str = ""):
    """``lowered`` (a module) with every ``op`` statement (``"mbarrier_wait"``, ...)
    whose first argument's buffer name holds ``name_part`` dropped."""
    return lowered.map_functions(lambda f: f.with_body(_DropOps(op, name_part).visit(f.body)))


def check_tma_wgmma_sass(src: str, kernel: str, hgmma: str) -> str:
    """Assert that ``kernel`` of the CUDA ``src`` compiles for sm_90a (warnings are
    errors) into the ``hgmma`` instruction (a regex), tensor copies and mbarrier
    arrivals and phase waits, loads nothing from global memory through the threads
    and spills nothing; its SASS."""
    code = sass(src, "sm_90a")[kernel]
    assert re.search(hgmma, code)
    assert "UTMALDG.2D" in code and "SYNCS.PHASECHK.TRANS64.TRYWAIT" in code
    assert "SYNCS.ARRIVE.TRANS64" in code
    assert not re.search(r"\bLDG\b", code)
    usage = resource_usage(src, "sm_90a")[kernel]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0
    return code


def check_early_read_races(lowered, args, copy: str, read: str, name_part: str = "") -> None:
    """Assert that ``lowered`` without its ``mbarrier_wait`` statements (on barriers
    whose name holds ``name_part``) is, run on ``args`` with ``check_races=True``, a
    ``RaceError`` naming the copy (its text holds ``copy``) and the read (``read``)."""
    with pytest.raises(T.RaceError, match="still in flight") as err:
        T.interpret(without_ops(lowered, "mbarrier_wait", name_part), *args,
                    check_races=True)
    first, second = err.value.statements
    assert copy in first and read in second
