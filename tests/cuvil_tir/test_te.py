"""The te DSL and create_prim_func: the structure of the blocks it builds, and its errors."""

from __future__ import annotations

import numpy as np
import pytest

import cuvil_tir as T
from cuvil_tir.node import same


def blocks(func):
    """Every BlockRealize below the root, in order."""
    out = []

    class V(T.Visitor):
        def visit_BlockRealize(self, br):
            if br.block.name != "root":
                out.append(br)
            self.generic_visit(br)

    V().visit(func.body)
    return out


def loops_above(func, name):
    chain = []

    def walk(s, acc):
        if isinstance(s, T.For):
            walk(s.body, acc + [s])
        elif isinstance(s, T.SeqStmt):
            for x in s.seq:
                walk(x, acc)
        elif isinstance(s, T.BlockRealize):
            if s.block.name == name:
                chain.extend(acc)
            walk(s.block.body, acc)

    walk(func.body, [])
    return chain


def matmul():
    A = T.placeholder((8, 4), name="A")
    B = T.placeholder((4, 6), name="B")
    k = T.reduce_axis((0, 4), name="k")
    C = T.compute((8, 6), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, T.create_prim_func([A, B, C])


def test_tensor_properties():
    A = T.placeholder((3, 5), "int8", name="A")
    assert (A.name, A.dtype, A.ndim, [s.value for s in A.shape]) == ("A", "int8", 2, [3, 5])
    B = T.compute((3, 5), lambda r, c: A[r, c] * 2, name="B")
    assert [ax.var.name for ax in B.op.axis] == ["r", "c"]
    assert [ax.kind for ax in B.op.axis] == ["spatial", "spatial"]
    assert B.op.inputs == (A,) and B.dtype == "int8"
    assert type(A[1, 2]) is T.BufferLoad and A[1, 2].buffer is A.buffer


def test_reduce_axis():
    k = T.reduce_axis((2, 10), name="k")
    assert (k.kind, k.var.name, k.dom.min.value, k.dom.extent.value) == ("reduce", "k", 2, 8)
    k2 = T.reduce_axis(5, name="r")
    assert (k2.dom.min.value, k2.dom.extent.value) == (0, 5)
    assert type(k + 1) is T.Add and (k + 1).a is k.var


def test_params_and_root_block():
    A, B, C, f = matmul()
    assert f.params == (A.buffer, B.buffer, C.buffer) and f.name == "main"
    assert isinstance(f.body, T.BlockRealize) and f.body.block.name == "root"
    assert f.body.block.alloc_buffers == () and f.body.iter_values == ()
    assert T.create_prim_func([A, B, C], name="mm").name == "mm"


def test_reduction_block_structure():
    A, B, C, f = matmul()
    (br,) = blocks(f)
    blk = br.block
    assert blk.name == "C"
    assert [(iv.var.name, iv.kind, iv.dom.extent.value) for iv in blk.iter_vars] == \
        [("v_i", "spatial", 8), ("v_j", "spatial", 6), ("v_k", "reduce", 4)]
    loops = loops_above(f, "C")
    assert [(lp.loop_var.name, lp.extent.value, lp.kind) for lp in loops] == \
        [("i", 8, "serial"), ("j", 6, "serial"), ("k", 4, "serial")]
    assert all(v is lp.loop_var for v, lp in zip(br.iter_values, loops))
    assert isinstance(br.predicate, T.IntImm) and br.predicate.value == 1
    vi, vj, vk = (iv.var for iv in blk.iter_vars)
    # init: C[vi, vj] = 0; body: C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    assert same(blk.init, T.BufferStore(C.buffer, T.const(0.0), (vi, vj)))
    want = T.BufferStore(C.buffer, C.buffer[vi, vj] + A.buffer[vi, vk] * B.buffer[vk, vj],
                         (vi, vj))
    assert same(blk.body, want)
    assert [r.buffer.name for r in blk.reads] == ["A", "B"]
    assert same(blk.reads[0].region, (T.Range(vi, T.const(1)), T.Range(vk, T.const(1))))
    assert len(blk.writes) == 1 and blk.writes[0].buffer is C.buffer
    assert same(blk.writes[0].region, (T.Range(vi, T.const(1)), T.Range(vj, T.const(1))))


@pytest.mark.parametrize("combiner,identity", [(T.sum, 0.0), (T.prod, 1.0),
                                               (T.max, float("-inf")),
                                               (T.min, float("inf"))])
def test_reduction_inits(combiner, identity):
    A = T.placeholder((4,), name="A")
    k = T.reduce_axis((0, 4), name="k")
    R = T.compute((1,), lambda i: combiner(A[k], axis=k), name="R")
    (br,) = blocks(T.create_prim_func([A, R]))
    assert br.block.init.value.value == identity


def test_integer_max_init_is_min_value():
    A = T.placeholder((4,), "int8", name="A")
    k = T.reduce_axis((0, 4), name="k")
    R = T.compute((1,), lambda i: T.max(A[k], axis=k), name="R")
    (br,) = blocks(T.create_prim_func([A, R]))
    assert br.block.init.value.value == -128 and br.block.init.value.dtype == "int8"


def test_where_becomes_if_then_else_with_identity():
    A = T.placeholder((4,), name="A")
    k = T.reduce_axis((0, 4), name="k")
    R = T.compute((4,), lambda i: T.sum(A[k], axis=k, where=k < i), name="R")
    (br,) = blocks(T.create_prim_func([A, R]))
    update = br.block.body.value
    assert type(update) is T.Add and type(update.b) is T.Call
    assert update.b.op == "if_then_else" and update.b.args[2].value == 0.0


def test_intermediates_are_root_alloc_buffers_and_read_regions_merge():
    A = T.placeholder((4, 4), name="A")
    k = T.reduce_axis((0, 4), name="k")
    S = T.compute((4,), lambda i: T.sum(A[i, k], axis=k), name="S")
    B = T.compute((4,), lambda i: S[i] + A[i, 0] + A[i, 2], name="B")
    f = T.create_prim_func([A, B])
    assert f.body.block.alloc_buffers == (S.buffer,)
    names = [br.block.name for br in blocks(f)]
    assert names == ["S", "B"]
    b_blk = blocks(f)[1].block
    assert [r.buffer.name for r in b_blk.reads] == ["S", "A"]
    a_region = b_blk.reads[1].region
    assert a_region[1].min.value == 0 and a_region[1].extent.value == 3  # A[i, 0:3]


def test_duplicate_stage_names_are_made_unique():
    B = T.placeholder((4,), name="B")
    C1 = T.compute((4,), lambda i: B[i] * 2.0, name="C")
    C2 = T.compute((4,), lambda i: C1[i] + C1[i], name="C")
    f = T.create_prim_func([B, C2])
    assert [br.block.name for br in blocks(f)] == ["C", "C_1"]
    b, c = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    T.interpret(f, b, c)
    np.testing.assert_array_equal(c, 4 * b)


def test_scalar_var_params_and_symbolic_shapes():
    n = T.size_var("n")
    alpha = T.var("alpha", "float32")
    A = T.placeholder((n,), name="A")
    B = T.compute((n,), lambda i: A[i] * alpha, name="B")
    f = T.create_prim_func([A, alpha, B])
    assert f.params[1] is alpha and f.params[0].shape[0] is n
    (br,) = blocks(f)
    assert br.block.iter_vars[0].dom.extent is n


def test_compute_attrs_become_block_annotations():
    A = T.placeholder((2,), name="A")
    B = T.compute((2,), lambda i: A[i], name="B", attrs={"tag": "copy"})
    (br,) = blocks(T.create_prim_func([A, B]))
    assert br.block.annotations == (("tag", "copy"),)


@pytest.mark.parametrize("build,err,msg", [
    (lambda A, k: T.compute((4,), lambda i: T.sum(A[i, k], axis=k) + 1.0, name="S"),
     T.ShapeError, r"compute S: a reduction \(T.sum/T.max/…\) must be the whole body"),
    (lambda A, k: T.compute((4,), lambda i: T.exp(T.max(A[i, k], axis=k)), name="S"),
     T.ShapeError, r"found one nested inside an expression"),
    (lambda A, k: A[1], T.ShapeError,
     r"tensor A has 2 dimension\(s\) but was indexed with 1 index\(es\)"),
    (lambda A, k: A[1, 2, 3], T.ShapeError, r"indexed with 3 index\(es\)"),
    (lambda A, k: T.compute((4,), lambda i: (A[i, 0], A[i, 1]), name="S"), T.ShapeError,
     r"compute S: fcompute returned 2 values; one output per compute"),
    (lambda A, k: T.sum(A[0, 0], axis=T.var("q")), T.DTypeError,
     r"reduction axis must come from T.reduce_axis, found q"),
    (lambda A, k: T.sum(A[0, 0], axis=[]), T.DTypeError, r"a reduction needs at least one axis"),
    (lambda A, k: T.sum(A[0, 0], axis=k, where=T.var("z")), T.DTypeError,
     r"T.sum: 'where' must be bool, found int32"),
    (lambda A, k: T.sum(A[0, 0] < 1.0, axis=k), T.DTypeError, r"T.sum: cannot reduce bool"),
    (lambda A, k: T.max(A[0, 0]), T.DTypeError, r"T.max needs an axis="),
    (lambda A, k: T.placeholder((-1,), name="N"), T.ShapeError,
     r"shape entries must be non-negative, found -1"),
    (lambda A, k: A[A[0, 0], 0], T.DTypeError, r"tensor A: indices must be integers"),
])
def test_te_errors(build, err, msg):
    A = T.placeholder((4, 4), name="A")
    k = T.reduce_axis((0, 4), name="k")
    with pytest.raises(err, match=msg):
        build(A, k)


def test_create_prim_func_errors():
    B = T.placeholder((4,), name="B")
    C = T.compute((4,), lambda i: B[i] * 2.0, name="C")
    with pytest.raises(T.ShapeError, match=r"placeholder B is read by a compute but is not in "
                                           r"the argument list; add it"):
        T.create_prim_func([C])
    with pytest.raises(T.ShapeError, match=r"arguments are tensors or T.var scalars, found 3"):
        T.create_prim_func([B, C, 3])


def test_sum_init_starts_the_reduction_from_an_expression():
    """``T.sum(..., init=bias[j])`` (TVM's init=): the block's init stores the bias, its
    reads include it; the interpreter agrees with numpy (the Gemmini-like NPU's
    tests build it)."""
    A = T.placeholder((5, 3), "int32", name="A")
    bias = T.placeholder((5,), "int32", name="bias")
    k = T.reduce_axis((0, 3), name="k")
    C = T.compute((5,), lambda i: T.sum(A[i, k], axis=k, init=bias[i]), name="C")
    f = T.create_prim_func([A, bias, C])
    assert "C[v_i] = bias[v_i]" in str(f) and "T.reads(A[v_i, v_k], bias[v_i])" in str(f)
    a = np.arange(15, dtype="int32").reshape(5, 3)
    b = np.arange(5, dtype="int32") * 100
    c = np.zeros(5, "int32")
    T.interpret(f, a, b, c)
    np.testing.assert_array_equal(c, a.sum(1) + b)


def test_sum_init_of_another_dtype_is_refused():
    A = T.placeholder((4,), "int32", name="A")
    k = T.reduce_axis((0, 4), name="k")
    with pytest.raises(T.DTypeError, match=r"T.sum: init must have the reduced values' "
                       r"dtype int32, found float32; cast it"):
        T.sum(A[k], axis=k, init=T.const(1.0, "float32"))
