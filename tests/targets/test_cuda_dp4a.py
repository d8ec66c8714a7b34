"""``dp4a`` (targets/cuda/dp4a.py): TVM's four byte-dot-product intrinsics tensorized into
a dense int8 kernel, exact in the interpreter (int32 and uint32 wrapping included),
IDP.4A with the right signedness in the SASS for sm_80 and sm_90a, no spills."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets
from schedules.primitives.tensorize import TensorizeMismatchError
from targets.cuda.dp4a import KINDS
from targets.cuda.nvcc import resource_usage, sass

SASS_KIND = {"int8": "S8", "uint8": "U8"}


def dense(a: str, b: str, acc: str, m=16, n=32, k=64):
    A = T.placeholder((m, k), a, name="A")
    B = T.placeholder((n, k), b, name="B")
    r = T.reduce_axis((0, k), name="k")
    C = T.compute((m, n), lambda i, j: T.sum(A[i, r].astype(acc) * B[j, r].astype(acc),
                                             axis=r), name="C")
    return T.create_prim_func([A, B, C])


def schedule(name: str) -> S.Schedule:
    """A block per row, a thread per column, A and B staged in shared memory, C in a
    register, the k loop's inner 4 tensorized with ``name``."""
    a, b, acc = KINDS[name]
    sch = S.Schedule(dense(a, b, acc))
    blk = sch.get_block("C")
    i, j, k = sch.get_loops(blk)
    ko, ki = sch.split(k, [None, 4])
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    for idx in (0, 1):
        sch.compute_at(sch.cache_read(blk, idx, "shared"), j)
    sch.reverse_compute_at(sch.cache_write(blk, 0, "local"), j)
    sch.decompose_reduction(blk, ko)
    sch.tensorize(ki, name)
    return sch


def build(name: str, arch: str = "sm_80"):
    return targets.build(schedule(name), targets.Target("cuda", arch=arch), name=name)


MODS = {name: build(name) for name in KINDS}


def operands(a: str, b: str, m=16, n=32, k=64):
    g = np.random.default_rng(1)
    lo = {"int8": -128, "uint8": 0}
    return (g.integers(lo[a], lo[a] + 256, (m, k)).astype(a),
            g.integers(lo[b], lo[b] + 256, (n, k)).astype(b))


@pytest.mark.parametrize("name", sorted(KINDS))
def test_dp4a_dense_is_exact_in_the_interpreter(name):
    a_dt, b_dt, acc = KINDS[name]
    a, b = operands(a_dt, b_dt)
    c = np.zeros((16, 32), acc)
    T.interpret(MODS[name].lowered, a, b, c, check_races=True)
    ref = (a.astype(np.int64) @ b.astype(np.int64).T).astype(acc)
    np.testing.assert_array_equal(c, ref)
    assert "cuda.dp4a_" in MODS[name].lowered.script()


def test_uint32_accumulation_wraps_as_the_instruction_does():
    a = np.full((16, 64), 255, "uint8")
    c = np.zeros((16, 32), "uint32")
    mod = build("dp4a_u8u8u32")
    T.interpret(mod.lowered, a, a[:, :64].repeat(2, axis=0), c)
    assert c[0, 0] == np.uint32(64 * 255 * 255)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_dp4a_kernels_use_idp4a_without_spills(name, arch):
    a_dt, b_dt, _ = KINDS[name]
    src = MODS[name].get_source("cuda")
    code = sass(src, arch)[f"{name}_kernel0"]
    assert re.search(rf"IDP\.4A\.{SASS_KIND[a_dt]}\.{SASS_KIND[b_dt]}\b", code)
    usage = resource_usage(src, arch)[f"{name}_kernel0"]
    assert usage["spill_stores"] == usage["spill_loads"] == usage["stack"] == 0


def test_tensorize_refuses_dp4a_on_float_operands():
    sch = S.Schedule(dense("float32", "float32", "float32"))
    blk = sch.get_block("C")
    _, _, k = sch.get_loops(blk)
    _, ki = sch.split(k, [None, 4])
    with pytest.raises(TensorizeMismatchError, match=r"int32, found .C. of float32 \(intrinsic 'dp4a_s8s8s32'\)"):
        sch.tensorize(ki, "dp4a_s8s8s32")


def test_the_tensorized_function_prints_and_parses_back():
    func = schedule("dp4a_u8s8s32").func
    text = str(func)
    assert 'T.call_intrin("int32", "cuda.dp4a_u8s8", ' in text
    assert T.structural_equal(T.parse(text), func)
