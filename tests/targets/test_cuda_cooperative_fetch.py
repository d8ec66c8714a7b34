"""MetaSchedule's ``meta_schedule.cooperative_fetch`` annotation (the copy's loop shared
by the block's threads) and a shared tile under overlapping iterations; checked by the
interpreter's GPU semantics (with race checks) against the serial meaning, and by
nvcc."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.transform.gpu_cooperative_fetch import cooperative_fetch

from .cuda_helpers import compile_all, rand

# a 64-element copy annotated for 2 lanes, under 4 x 8 threads (N=64, per=64: no guard)
# or 3 x 8 threads (per=48: the last round is guarded)
FETCH = '''
@T.prim_func
def f(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32")):
    S = T.alloc_buffer((4, 64), scope="shared")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for ty in T.thread_binding(TY, thread="threadIdx.y"):
            for tx in T.thread_binding(8, thread="threadIdx.x"):
                for i in T.serial(64):
                    with T.block("S"):
                        vb = T.axis.spatial(4, bx)
                        v = T.axis.spatial(64, i)
                        T.block_attr({"meta_schedule.cooperative_fetch": 2})
                        S[vb, v] = A[vb, v]
                for j in T.serial(JN):
                    with T.block("B"):
                        vb = T.axis.spatial(4, bx)
                        v = T.axis.spatial(64, (j * TY + ty) * 8 + tx)
                        T.where((j * TY + ty) * 8 + tx < 64)
                        B[vb, v] = S[vb, 63 - v] * T.float32(2)
'''


def _fetch(ty):
    return T.parse(FETCH.replace("JN", str(-(-64 // (ty * 8)))).replace("TY", str(ty)))


@pytest.mark.parametrize("ty", [4, 3])
def test_cooperative_fetch_spreads_the_copy_over_the_block(ty):
    f = _fetch(ty)
    spread = T.to_text(cooperative_fetch(f))
    assert "meta_schedule.cooperative_fetch" not in spread
    assert "T.vectorized(2)" in spread
    assert ("T.if_then_else" in spread or "if " in spread) == (ty == 3)
    mod = targets.build(f, targets.Target("cuda"), name=f"fetch{ty}")
    compile_all([mod])
    a = rand((4, 64))
    b = np.full((4, 64), np.nan, "float32")
    T.interpret(mod.lowered, a, b, check_races=True)
    np.testing.assert_array_equal(b, a[:, ::-1] * 2)


def test_cooperative_fetch_of_a_symbolic_loop_is_left_to_every_thread():
    f = T.parse('''
@T.prim_func
def f(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,))
    B = T.match_buffer(b, (n,))
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        for i in T.serial(n):
            with T.block("B"):
                v = T.axis.spatial(n, i)
                T.block_attr({"meta_schedule.cooperative_fetch": 4})
                B[v] = A[v] + T.float32(1)
''')
    out = cooperative_fetch(f)
    text = T.to_text(out)
    assert "meta_schedule.cooperative_fetch" not in text
    assert "for i in T.serial(n)" in text
    a, b = rand((10,)), np.zeros(10, "float32")
    T.interpret(targets.build(f, targets.Target("cuda")).lowered, a, b, 10,
                check_races=True)
    np.testing.assert_array_equal(b, a + 1)


def test_cooperative_fetch_without_threads_is_refused():
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for i in T.serial(8):
            with T.block("B"):
                v = T.axis.spatial(8, i)
                T.block_attr({"meta_schedule.cooperative_fetch": 1})
                B[v] = A[v]
''')
    with pytest.raises(LoweringError, match="not inside a loop bound to threadIdx.x, so "
                       "there are no threads to share it"):
        cooperative_fetch(f)


# a 4-wide window sum: each iteration of r0 copies a 17-element window, and the windows
# of r0 = 0 and 1 overlap (one tile for both, so an element keeps its place; 34 is the
# bound of the guarded copy, f * 16 + tx < 17, taken loop by loop)
WINDOW = '''
@T.prim_func
def win(A: T.Buffer((67,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((67,), scope="shared")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            for r0 in range(2):
                for f in range(2):
                    with T.block("S"):
                        v = T.axis.spatial(67, bx * 16 + r0 * 2 + f * 16 + tx)
                        T.where(f * 16 + tx < 17)
                        S[v] = A[v]
                for r1 in range(2):
                    with T.block("B"):
                        vi = T.axis.spatial(64, bx * 16 + tx)
                        vr = T.axis.reduce(4, r0 * 2 + r1)
                        with T.init():
                            B[vi] = T.float32(0)
                        B[vi] = B[vi] + S[vi + vr]
'''

def test_shared_tile_of_overlapping_iterations():
    text, size = WINDOW, 34
    f = T.parse(text)
    mod = targets.build(f, targets.Target("cuda"), name=f.name)
    compile_all([mod])
    # one tile for both iterations of r0, not the whole buffer
    assert f'T.allocate(({size},), "float32", scope="shared")' in T.to_text(mod.lowered)
    a = rand((int(f.params[0].shape[0]),))
    b = np.full((int(f.params[1].shape[0]),), np.nan, "float32")
    T.interpret(mod.lowered, a, b, check_races=True)
    np.testing.assert_allclose(b, sum(a[r:r + 64] for r in range(4)), rtol=1e-5,
                               atol=1e-5)
