"""tensorize and TensorIntrin: the shipped CPU GEMM micro-kernel, a user intrinsic and
the first-mismatch error messages (registration checks: tests/cuvil_tir/test_tensor_intrin.py)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.expr import Ramp, Var, const
from cuvil_tir.stmt import (Block, BlockRealize, BufferRegion, BufferStore, For, IterVar,
                            Range)
from cuvil_tir.analysis import tree
from schedules.errors import ScheduleArgumentError
from schedules.intrinsics.cpu import gemm_intrin
from schedules.primitives.tensorize import TensorizeMismatchError
from tests import workloads
from tests.schedules.testing import (assert_refused, check_workload, run,
                                     verify_trace_roundtrip)

GEMM = "cpu.gemm_4x8x4_f32"


def tiled(w, ti=4, tj=8, tk=4, order=("io", "jo", "ko", "ii", "ji", "ki")):
    sch = S.Schedule(w.func)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    loops = {}
    loops["io"], loops["ii"] = sch.split(i, [None, ti])
    loops["jo"], loops["ji"] = sch.split(j, [None, tj])
    loops["ko"], loops["ki"] = sch.split(k, [None, tk])
    sch.reorder(*[loops[n] for n in order])
    return sch, loops


def nodes_of(func, cls):
    out = []
    T.post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def test_gemm_intrinsic_matmul_values_and_structure():
    w = workloads.matmul(16, 16, 16)
    sch, loops = tiled(w)
    sch.tensorize(loops["ii"], GEMM)
    ob = tree.get(sch.func, tree.find_block(sch.func, "C_o")).block
    assert [b.name for b in ob.alloc_buffers] == ["acc"] and ob.alloc_buffers[0].scope == "local"
    assert ob.init is not None                       # C tile zeroed once per (i_0, j_0)
    assert not tree.blocks_under(ob.body)            # the inner block became the impl
    ramps = nodes_of(sch.func, Ramp)
    assert ramps and {r.lanes for r in ramps} == {8}
    stores = [s for _, s in tree.walk(ob.body) if isinstance(s, BufferStore)]
    assert [str(x) for x in stores[-1].indices] == ["v_i_o * 4 + i",
                                                    "T.Ramp(v_j_o * 8, 1, 8)"]
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_gemm_intrinsic_twice_gets_fresh_loop_vars():
    w = workloads.matmul_bias_relu(8, 16, 8)
    sch, loops = tiled(w)
    sch.tensorize(loops["ii"], GEMM)
    d = sch.get_block("D")
    i, j = sch.get_loops(d)
    ids = [id(l.loop_var) for _, l in tree.walk(sch.func) if isinstance(l, For)]
    assert len(ids) == len(set(ids))
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_tensorize_blockized_block():
    w = workloads.matmul(8, 8, 8)
    sch, loops = tiled(w)
    outer = sch.blockize(loops["ii"])
    sch.tensorize(outer, GEMM)
    check_workload(sch, w)
    verify_trace_roundtrip(sch, w.func)


def test_mismatch_names_the_first_differing_loop():
    w = workloads.matmul(8, 8, 8)
    sch, loops = tiled(w, order=("io", "jo", "ko", "ii", "ki", "ji"))
    assert_refused(sch, lambda: sch.tensorize(loops["ii"], GEMM),
                   "tensorize: loop extent mismatch at loop 'k_1': desc has 8, found 4",
                   TensorizeMismatchError)
    sch2, loops2 = tiled(w, tk=8)
    assert_refused(sch2, lambda: sch2.tensorize(loops2["ii"], GEMM),
                   "tensorize: loop extent mismatch at loop 'k_1': desc has 4, found 8",
                   TensorizeMismatchError)


def test_mismatch_dtype_and_body():
    w64 = workloads.matmul(8, 8, 8, dtype="float64")
    sch, loops = tiled(w64)
    assert_refused(sch, lambda: sch.tensorize(loops["ii"], GEMM),
                   "tensorize: dtype mismatch in the store to 'C': desc buffer 'C' is float32, "
                   "found 'C' of float64", TensorizeMismatchError)
    A = T.placeholder((8, 8), name="A")
    B = T.placeholder((8, 8), name="B")
    r = T.reduce_axis((0, 8), name="k")
    C = T.compute((8, 8), lambda i, j: T.max(A[i, r] * B[r, j], axis=r), name="C")
    wmax = workloads.Workload("maxmul", T.create_prim_func([A, B, C]), None, None)
    sch, loops = tiled(wmax)
    assert_refused(sch, lambda: sch.tensorize(loops["ii"], GEMM),
                   "tensorize: expression mismatch in the store to 'C': desc has Add",
                   TensorizeMismatchError)


def test_mismatch_binding_order_and_unknown_intrinsic():
    S.TensorIntrin.register("test.gemm_4x4x4_f32", *gemm_intrin(4, 4, 4), override=True)
    w = workloads.matmul(8, 8, 8)
    sch, loops = tiled(w, tj=4, order=("io", "jo", "ko", "ii", "ki", "ji"))
    assert_refused(sch, lambda: sch.tensorize(loops["ii"], "test.gemm_4x4x4_f32"),
                   "tensorize: variable mismatch at block 'C': desc uses 'j' where "
                   "'j_1' is found", TensorizeMismatchError)
    assert_refused(sch, lambda: sch.tensorize(loops["ii"], "cpu.nope"),
                   r"no tensor intrinsic named 'cpu.nope'; registered: \[.*'cpu.gemm_4x8x4_f32'",
                   ScheduleArgumentError)
    # an unknown name is a wrong argument value: a ValueError too, as in TVM
    with pytest.raises(ValueError, match=r"no tensor intrinsic named 'cpu.nope'.*or "
                       r"probe with TensorIntrin.get\(name, allow_missing=True\)"):
        S.TensorIntrin.get("cpu.nope")


def test_get_allow_missing_probes_for_an_intrinsic():
    assert S.TensorIntrin.get("cpu.nope", allow_missing=True) is None
    assert S.TensorIntrin.get("cpu.gemm_4x8x4_f32", allow_missing=True).name == \
        "cpu.gemm_4x8x4_f32"
    with pytest.raises(ScheduleArgumentError, match="allow_missing: expected True or "
                       "False, found 'yes'"):
        S.TensorIntrin.get("cpu.nope", allow_missing="yes")


def scale4():
    """A user intrinsic: ``B[0:4] = A[0:4] * 2`` as one 4-lane vector store."""
    A, B = T.decl_buffer((4,), "float32", "A"), T.decl_buffer((4,), "float32", "B")
    i, vi = Var("i"), Var("vi")
    blk = Block("scale", (IterVar(vi, Range.from_extent(4)),),
                (BufferRegion(A, (Range(vi, const(1)),)),),
                (BufferRegion(B, (Range(vi, const(1)),)),),
                BufferStore(B, A[vi] * 2.0, (vi,)))
    desc = T.PrimFunc((A, B), For(i, const(0), const(4), "serial",
                                  BlockRealize((i,), const(True), blk)))
    A2, B2 = T.decl_buffer((4,), "float32", "A"), T.decl_buffer((4,), "float32", "B")
    lanes = Ramp(const(0), const(1), 4)
    impl = T.PrimFunc((A2, B2), BufferStore(B2, A2[lanes] * T.Broadcast(const(2.0), 4),
                                            (lanes,)))
    return desc, impl


def test_user_intrinsic_on_2d_elementwise():
    S.TensorIntrin.register("test.scale4", *scale4(), override=True)
    A = T.placeholder((3, 8), name="A")
    f = T.create_prim_func([A, T.compute((3, 8), lambda i, j: A[i, j] * 2.0, name="B")])
    sch = S.Schedule(f)
    i, j = sch.get_loops(sch.get_block("B"))
    jo, ji = sch.split(j, [None, 4])
    sch.tensorize(ji, "test.scale4")
    (st,) = [s for _, s in tree.walk(sch.func) if isinstance(s, BufferStore)]
    assert [str(x) for x in st.indices] == ["v_i_o", "T.Ramp(v_j_o * 4, 1, 4)"]
    a = np.arange(24, dtype="float32").reshape(3, 8)
    out = run(sch, [a, np.zeros((3, 8), "float32")])
    np.testing.assert_array_equal(out[1], a * 2)
    verify_trace_roundtrip(sch, f)


MATMUL_INT64 = '''@T.prim_func
def main(A: T.Buffer((T.int64(16), T.int64(8)), "float32"),
         B: T.Buffer((T.int64(8), T.int64(16)), "float32"),
         C: T.Buffer((T.int64(16), T.int64(16)), "float32")):
    for i, j, k in T.grid(T.int64(16), T.int64(16), T.int64(8)):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''


def test_an_int32_intrinsic_tensorizes_a_nest_of_int64_shapes():
    # the intrinsic is written with int32 indices; the nest's loops are int64 (shapes
    # from a frontend that sizes in int64): desc and impl are retyped before matching
    from tests.schedules.testing import run_llvm
    f = T.parse(MATMUL_INT64)
    sch = S.Schedule(f)
    i, j, k = sch.get_loops("C")
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 8])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(io, jo, ko, ii, ji, ki)
    sch.tensorize(ii, GEMM)
    ob = tree.get(sch.func, tree.find_block(sch.func, "C_o")).block
    loops = [s for _, s in tree.walk(ob.body) if isinstance(s, For)]
    assert loops and {l.loop_var.dtype for l in loops} == {"int64"}
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 8)).astype("float32")
    b = rng.standard_normal((8, 16)).astype("float32")
    for out in (run(sch, [a, b, np.zeros((16, 16), "float32")]),
                run_llvm(sch, [a, b, np.zeros((16, 16), "float32")])):
        np.testing.assert_allclose(out[2], a @ b, rtol=1e-5, atol=1e-5)
    verify_trace_roundtrip(sch, f)


def test_with_index_dtype_keeps_what_a_function_computes():
    from schedules.index_dtype import index_dtype, with_index_dtype
    w = workloads.matmul_bias_relu(4, 8, 4)
    g = with_index_dtype(w.func, "int64")
    assert (index_dtype(w.func), index_dtype(g)) == ("int32", "int64")
    arrays = w.make_inputs(np.random.default_rng(1))
    w.check(run(g, arrays))
    assert index_dtype(with_index_dtype(g, "int32")) == "int32"


UNPACK_DESC = '''@T.prim_func
def desc(C: T.Buffer((1,), "int32"), D: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        with T.block("decode"):
            vi = T.axis.spatial(8, i)
            D[vi] = T.Cast("float32", T.bitwise_and(T.shift_right(C[vi // 8], vi % 8 * 4), 15))
'''

UNPACK_IMPL = '''@T.prim_func
def impl(C: T.Buffer((1,), "int32"), D: T.Buffer((8,), "float32")):
    for i in T.unroll(8):
        D[i] = T.Cast("float32", T.bitwise_and(T.shift_right(C[0], i * 4), 15))
'''

UNPACK = '''@T.prim_func
def main(W: T.Buffer((4, 4), "int32"), Q: T.Buffer((4, 32), "float32")):
    for r, c0, c1 in T.grid(4, 4, 8):
        with T.block("Q"):
            vr = T.axis.spatial(4, r)
            vc = T.axis.spatial(32, c0 * 8 + c1)
            Q[vr, vc] = T.Cast("float32", T.bitwise_and(T.shift_right(W[vr, vc // 8], vc % 8 * 4), 15))
'''


def test_tensorize_matches_in_normal_form_over_the_tile():
    # after blockize the nest indexes W[vr, (c_o * 8 + vi) // 8] and shifts by
    # (c_o * 8 + vi) % 8 * 4; the desc says C[vi // 8] and vi % 8 * 4: over vi in
    # [0, 8) both are C[c_o] and vi * 4, as TensorIR's matcher simplifies them
    S.TensorIntrin.register("test.unpack8", T.parse(UNPACK_DESC), T.parse(UNPACK_IMPL),
                            override=True)
    f = T.parse(UNPACK)
    sch = S.Schedule(f)
    sch.tensorize(sch.get_loops("Q")[-1], "test.unpack8")
    outer = tree.get(sch.func, tree.find_block(sch.func, "Q_o")).block
    assert [T.to_text(r.region[1].min) for r in outer.reads] == ["vc_o"]
    w = np.random.default_rng(0).integers(-2**31, 2**31 - 1, (4, 4), dtype="int32")
    want = np.array([[(int(w[r, c // 8]) >> (c % 8 * 4)) & 15 for c in range(32)]
                     for r in range(4)], "float32")
    from tests.schedules.testing import run_llvm
    for out in (run(sch, [w, np.zeros((4, 32), "float32")]),
                run_llvm(sch, [w, np.zeros((4, 32), "float32")])):
        np.testing.assert_array_equal(out[1], want)
    verify_trace_roundtrip(sch, f)
