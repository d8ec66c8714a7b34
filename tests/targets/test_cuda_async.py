"""Asynchronous copies (``async_copy`` / ``async_commit_group`` / ``async_wait_group``,
CUDA's ``cp.async``): exact semantics in the interpreter (a copy lands at the wait
that covers its group), races reported naming the copy and the access, CUDA C that
nvcc compiles for sm_80 and sm_90 into ``LDGSTS`` machine code."""

from __future__ import annotations

import re

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.parser import parse
from targets.cuda.nvcc import resource_usage, sass

from .cuda_helpers import ARCHS, rand

COPY = 'T.evaluate(T.call_intrin("int32", "async_copy", {dst}, {src}, {n}))'
COMMIT = 'T.evaluate(T.call_intrin("int32", "async_commit_group"))'
WAIT = 'T.evaluate(T.call_intrin("int32", "async_wait_group", {n}))'


def _pipelined(wait: str = WAIT.format(n=1), first_wait: str = "") -> str:
    """A two-stage pipeline: the copy of slice ko + 1 is in flight while slice ko is
    summed; each thread sums elements other threads copied (a barrier is needed)."""
    pre = COPY.format(dst="S[0, tx * 4]", src="A[bx, tx * 4]", n=16)
    nxt = COPY.format(dst="S[(ko + 1) % 2, tx * 4]", src="A[bx, ko * 128 + 128 + tx * 4]",
                      n=16)
    return f'''
def piped(A: T.Buffer((4, 512), "float32"), C: T.Buffer((4, 32), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.allocate((2, 128), "float32", scope="shared") as S:
                with T.allocate((1,), "float32", scope="local") as acc:
                    acc[0] = T.float32(0)
                    {pre}
                    {COMMIT}
                    {first_wait}
                    for ko in T.serial(4):
                        if ko + 1 < 4:
                            {nxt}
                        {COMMIT}
                        {wait}
                        for j in T.serial(4):
                            acc[0] = acc[0] + S[ko % 2, j * 32 + tx]
                    C[bx, tx] = acc[0]
'''


def _build(src: str, name: str):
    return targets.build(parse(src), "cuda", name=name)


def _expected(a):
    return a.reshape(4, 4, 4, 32).sum(axis=(1, 2))


PIPED = _build(_pipelined(), "piped")


def test_a_two_stage_cp_async_pipeline_computes_right_and_race_free():
    a, c = rand((4, 512)), np.zeros((4, 32), "float32")
    T.interpret(PIPED.lowered, a, c, check_races=True)
    np.testing.assert_allclose(c, _expected(a), rtol=1e-5, atol=1e-5)
    # the barrier pass put a barrier between the wait and the other threads' reads
    text = PIPED.get_source("cuda")
    assert re.search(r"cvl_cp_async_wait<1>\(\);\s*__syncthreads\(\);", text)


def test_a_removed_wait_is_a_race_naming_the_copy_and_the_read():
    mod = _build(_pipelined(wait=""), "no_wait")
    a, c = rand((4, 512)), np.zeros((4, 32), "float32")
    with pytest.raises(T.RaceError, match="still in flight") as err:
        T.interpret(mod.lowered, a, c, check_races=True)
    copy, read = err.value.statements
    assert '"async_copy", S[tx * 4], A[bx * 512 + tx * 4], 16' in copy
    assert "acc[0] = acc[0] + S[" in read and err.value.buffer == "S"
    # without the checker the read sees what the copy has not written yet (shared
    # memory starts as NaN): the sums are wrong
    c2 = np.zeros((4, 32), "float32")
    T.interpret(mod.lowered, a, c2)
    assert np.isnan(c2).all()


def test_waiting_for_too_few_groups_is_caught():
    # wait_group(2) lets the slice being summed stay in flight
    mod = _build(_pipelined(wait=WAIT.format(n=2)), "lax_wait")
    with pytest.raises(T.RaceError, match="asynchronous copy .* is still in flight"):
        T.interpret(mod.lowered, rand((4, 512)), np.zeros((4, 32), "float32"),
                    check_races=True)


def test_a_copy_landed_by_one_thread_needs_a_barrier_before_others_read_it():
    # the wait is there, but the read of another thread's copy is in the same phase:
    # the ordinary shared-memory race (the barrier pass would insert one; here the
    # lowered IR is interpreted with the barriers stripped)
    lowered = PIPED.lowered

    class Strip(T.Mutator):
        def visit_Evaluate(self, s):
            if getattr(s.value, "op", None) == "tvm_storage_sync":
                return T.Evaluate(T.const(0))
            return s
    stripped = lowered.map_functions(lambda f: f.with_body(Strip().visit(f.body)))
    with pytest.raises(T.RaceError, match="data race on shared buffer S") as err:
        T.interpret(stripped, rand((4, 512)), np.zeros((4, 32), "float32"),
                    check_races=True)
    assert any("async_copy" in s for s in err.value.statements)


def test_cp_async_compiles_to_ldgsts_for_sm80_and_sm90():
    src = PIPED.get_source("cuda")
    assert "cp.async.cg.shared.global" in src
    for arch in ARCHS:
        code = sass(src, arch)["piped_kernel0"]
        assert "LDGSTS" in code and "LDGDEPBAR" in code and "DEPBAR" in code
        usage = resource_usage(src, arch)["piped_kernel0"]
        assert usage["spill_stores"] == 0 and usage["shared"] == 2 * 128 * 4


def test_small_copies_use_the_ca_form():
    src = '''
def small(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.allocate((64,), "float32", scope="shared") as S:
                T.evaluate(T.call_intrin("int32", "async_copy", S[tx * 2], A[tx * 2], 8))
                T.evaluate(T.call_intrin("int32", "async_commit_group"))
                T.evaluate(T.call_intrin("int32", "async_wait_group", 0))
                B[tx] = S[63 - tx] + T.float32(bx)
'''
    mod = _build(src, "small_copy")
    a, b = rand((64,)), np.zeros(64, "float32")
    T.interpret(mod.lowered, a, b, check_races=True)
    np.testing.assert_array_equal(b[:32], a[63:31:-1])
    assert "cvl_cp_async<8>" in mod.get_source("cuda")
    assert "LDGSTS" in sass(mod.get_source("cuda"), "sm_80")["small_copy_kernel0"]


@pytest.mark.parametrize("copy, message", [
    ('S[0], A[0], 12', "the bytes must be a constant among"),
    ('S[0], I[0], 16', "an asynchronous copy moves bytes, the dtypes must agree"),
])
def test_copy_argument_errors(copy, message):
    src = f'''
def bad(A: T.Buffer((64,), "float32"), I: T.Buffer((64,), "int32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.allocate((64,), "float32", scope="shared") as S:
                T.evaluate(T.call_intrin("int32", "async_copy", {copy}))
                T.evaluate(T.call_intrin("int32", "async_commit_group"))
                T.evaluate(T.call_intrin("int32", "async_wait_group", 0))
                B[tx] = S[tx] + T.float32(bx)
'''
    f = parse(src)
    with pytest.raises(T.LoweringError, match=message):
        T.interpret(f, rand((64,)), np.zeros(64, "int32"), np.zeros(64, "float32"))
    with pytest.raises(targets.CodegenError, match=message):
        targets.build(f, "cuda", name="bad_copy")


def test_misaligned_and_out_of_bounds_copies_are_reported():
    def kernel(dst, src_at):
        return parse(f'''
def k(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(1, thread="threadIdx.x"):
            with T.allocate((64,), "float32", scope="shared") as S:
                T.evaluate(T.call_intrin("int32", "async_copy", S[{dst}], A[{src_at}], 16))
                T.evaluate(T.call_intrin("int32", "async_commit_group"))
                T.evaluate(T.call_intrin("int32", "async_wait_group", 0))
                B[tx] = S[0] + T.float32(bx)
''')
    with pytest.raises(T.LoweringError, match="both ends must be aligned to 16 bytes"):
        T.interpret(kernel(2, 0), rand((64,)), np.zeros(64, "float32"))
    with pytest.raises(T.LoweringError, match="out of bounds"):
        T.interpret(kernel(0, 62), rand((64,)), np.zeros(64, "float32"))


def test_global_destinations_and_symbolic_waits_are_refused_by_the_codegen():
    src = '''
def k(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), n: T.int32):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            COPY
            T.evaluate(T.call_intrin("int32", "async_commit_group"))
            T.evaluate(T.call_intrin("int32", "async_wait_group", n))
'''
    to_global = 'T.evaluate(T.call_intrin("int32", "async_copy", B[tx * 4], A[tx * 4], 16))'
    with pytest.raises(targets.CodegenError, match="cp.async copies global memory into "
                                                   "shared memory"):
        targets.build(parse(src.replace("COPY", to_global).replace(", n)", ", 0)")), "cuda",
                      name="to_global")
    with pytest.raises(targets.CodegenError, match="wait_group takes a constant count"):
        targets.build(parse(src.replace("COPY", "B[tx + bx] = A[tx]")), "cuda",
                      name="sym_wait")
