"""TVMScript as TVM prints it parses into ordinary Cuvil IR (issue 11, section 4).

Each program is written the way TVM prints (or accepts) it: handle parameters with
``T.match_buffer``, ``T.int32()`` sizes, ``range`` loops, ``+=``, ``T.axis.S/R``,
views matched inside blocks, constants, opaque blocks.  Each is checked numerically
and must round-trip through Cuvil's own printer.
"""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
import targets

ELEMENTWISE = '''
@T.prim_func
def elementwise(a: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (16, 16))
    B = T.alloc_buffer((16, 16))
    C = T.match_buffer(c, (16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            B[vi, vj] = A[vi, vj] * 2.0
    for i in range(16):
        for j in range(0, 16):
            with T.block("C"):
                vi = T.axis.S(16, i)
                vj = T.axis.spatial(16, j)
                C[vi, vj] = B[vi, vj] + 1.0
'''

SYMBOLIC_SUM = '''
@T.prim_func
def main(var_A: T.handle, var_B: T.handle):
    T.func_attr({"global_symbol": "main", "tir.noalias": T.bool(True)})
    n = T.int32()
    A = T.match_buffer(var_A, (n, 8))
    B = T.match_buffer(var_B, (n,))
    # with T.block("root"):
    for i, k in T.grid(n, 8):
        with T.block("B"):
            vi = T.axis.S(n, i)
            vk = T.axis.R(8, k)
            T.reads(A[vi, vk])
            T.writes(B[vi])
            with T.init():
                B[vi] = T.float32(0.0)
            B[vi] += A[vi, vk]
'''

CONST_TABLE = '''
@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    K_data = T.allocate_const([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], "float32", [16])
    K = T.decl_buffer((16,), "float32", data=K_data)
    for i in range(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = T.if_then_else(vi % 2 == 0, A[vi] * K[vi], T.float32(0), dtype="float32")
'''

TILED_VIEWS = '''
@T.prim_func
def main(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, [16, 16], elem_offset=0, align=64, offset_factor=1)
    B = T.match_buffer(b, [16, 16], elem_offset=0, align=64, offset_factor=1)
    C = T.match_buffer(c, [16, 16], elem_offset=0, align=64, offset_factor=1)
    for i_o, j_o in T.grid(4, 4):
        with T.block("tile"):
            vio, vjo = T.axis.remap("SS", [i_o, j_o])
            T.reads(A[vio * 4:vio * 4 + 4, 0:16], B[0:16, vjo * 4:vjo * 4 + 4])
            T.writes(C[vio * 4:vio * 4 + 4, vjo * 4:vjo * 4 + 4])
            A_sub = T.match_buffer(A[vio * 4:vio * 4 + 4, 0:16], (4, 16), offset_factor=1)
            s1 = T.int32()
            s0 = T.int32()
            C_off = T.int32()
            C_sub = T.match_buffer(C[vio * 4:vio * 4 + 4, vjo * 4:vjo * 4 + 4], (4, 4), strides=[s1, s0], elem_offset=C_off, offset_factor=1)
            for ii, jj in T.grid(4, 4):
                C_sub[ii, jj] = T.float32(0)
                for k in range(16):
                    C_sub[ii, jj] += A_sub[ii, k] * B[k, vjo * 4 + jj]
'''

OPAQUE_LOOPVARS = '''
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.serial(8):
        with T.block("opaque"):
            T.reads(A[i, 0:4])
            T.writes(B[i])
            B[i] = T.float32(0)
            for k in range(4):
                B[i] = B[i] + A[i, k]
'''

DOT_ZERO_DIM = '''
@T.prim_func
def dot(a: T.handle, b: T.handle, c: T.handle) -> None:
    A = T.match_buffer(a, (4,))
    B = T.match_buffer(b, (4,))
    C = T.match_buffer(c, ())
    with T.block("root"):
        T.reads(C[()], A[0 : 4], B[0 : 4])
        T.writes(C[()])
        for i in range(0, 4):
            with T.block("update"):
                vi = T.axis.remap("R", [i])
                C[()] = C[()] + A[vi] * B[vi]
'''

BLOCKIZED_BMM = '''
@T.prim_func
def bmm(A: T.Buffer((2, 8, 8), "float32"), B: T.Buffer((2, 8, 8), "float32"), C: T.Buffer((2, 8, 8), "float32")) -> None:
    for n, i, j in T.grid(2, 8, 8):
        with T.block("init"):
            vn, vi, vj = T.axis.remap("SSS", [n, i, j])
            T.reads()
            T.writes(C[vn, vi, vj])
            C[vn, vi, vj] = T.float32(0)
    for n, i, j, k_0 in T.grid(2, 8, 8, 2):
        with T.block("blockized_update"):
            vn, vi, vj, vko = T.axis.remap("SSSR", [n, i, j, k_0])
            T.reads(C[vn, vi, vj], A[vn, vi, vko * 4 : vko * 4 + 4], B[vn, vj, vko * 4 : vko * 4 + 4])
            T.writes(C[vn, vi, vj])
            A_1 = T.match_buffer(A[vn, vi, vko * 4 : vko * 4 + 4], [4], dtype="float32", offset_factor=1)
            B_1 = T.match_buffer(B[vn, vj, vko * 4 : vko * 4 + 4], [4], dtype="float32", offset_factor=1)
            C_1 = T.match_buffer(C[vn, vi, vj], [], dtype="float32", offset_factor=1)
            for k in T.grid(4):
                C_1[()] += A_1[k] * B_1[k]
'''

ALLOCATE_CONST_WITH = '''
@T.prim_func
def lut(A: T.Buffer((4, 3), "int32"), B: T.Buffer((4, 3), "int32")):
    for i in T.serial(4):
        with T.allocate_const([10, 20, 30, 40, 50, 60], "int32", [2, 3]) as K:
            for j in range(3):
                B[i, j] = A[i, j] + K[i % 2, j]
    with T.allocate([1], "int32", "local") as tmp:
        tmp[0] = 1
        B[0, 0] = B[0, 0] - tmp[0]
'''

rng = np.random.default_rng(0)


def parse(src):
    f = T.parse(src)
    g = T.parse(str(f))
    assert T.structural_equal(f, g) and str(g) == str(f), f"no round trip:\n{f}"
    return f


def rand(*shape):
    return rng.standard_normal(shape).astype("float32")


def test_handles_match_buffer_range_loops_and_short_axes():
    f = parse(ELEMENTWISE)
    assert [p.name for p in f.params] == ["A", "C"]
    a, c = rand(16, 16), np.zeros((16, 16), "float32")
    T.interpret(f, a, c)
    np.testing.assert_allclose(c, a * 2 + 1)
    sch = S.Schedule(f)           # scheduling works on what TVM printed
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    c2 = np.zeros((16, 16), "float32")
    T.interpret(sch.func, a, c2)
    np.testing.assert_allclose(c2, a * 2 + 1)


def test_int32_size_declaration_func_attr_and_augmented_assignment():
    f = parse(SYMBOLIC_SUM)
    a, b = rand(5, 8), np.zeros(5, "float32")
    mod = targets.build(f, "llvm")
    mod(a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)


def test_allocate_const_with_decl_buffer_and_if_then_else_dtype():
    f = parse(CONST_TABLE)
    a, c = rand(16), np.zeros(16, "float32")
    T.interpret(f, a, c)
    k = np.tile(np.arange(1, 9), 2).astype("float32")
    np.testing.assert_allclose(c, np.where(np.arange(16) % 2 == 0, a * k, 0))


def test_match_buffer_views_inside_a_block_with_strides_and_offset_vars():
    f = parse(TILED_VIEWS)
    a, b, c = rand(16, 16), rand(16, 16), np.zeros((16, 16), "float32")
    T.interpret(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_opaque_block_uses_the_loop_variables_around_it():
    # before: "block uses the loop variable 'i' directly"
    f = parse(OPAQUE_LOOPVARS)
    a, b = rand(8, 4), np.zeros(8, "float32")
    T.interpret(f, a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5, atol=1e-5)


def test_explicit_root_block_and_zero_dimensional_buffers():
    f = parse(DOT_ZERO_DIM)
    a, b, c = rand(4), rand(4), np.zeros((), "float32")
    T.interpret(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_views_that_drop_unit_dimensions_and_zero_dim_views():
    f = parse(BLOCKIZED_BMM)
    a, b, c = rand(2, 8, 8), rand(2, 8, 8), np.zeros((2, 8, 8), "float32")
    T.interpret(f, a, b, c)
    np.testing.assert_allclose(c, a @ b.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)


def test_with_allocate_const_and_positional_allocate_scope():
    f = parse(ALLOCATE_CONST_WITH)
    a, b = rng.integers(0, 9, (4, 3)).astype("int32"), np.zeros((4, 3), "int32")
    T.interpret(f, a, b)
    want = a + np.array([[10, 20, 30], [40, 50, 60]])[np.arange(4) % 2]
    want[0, 0] -= 1
    np.testing.assert_array_equal(b, want)


def test_tvm_annotations_evaluate_when_the_def_runs():
    # before: T.handle did not exist and T.Buffer(..., offset_factor=1) was a TypeError
    @T.prim_func
    def copy(a: T.handle, B: T.Buffer((8,), "float32", offset_factor=1)) -> None:
        A = T.match_buffer(a, (8,), "float32", elem_offset=0, offset_factor=1)
        for i in range(8):
            with T.block("B"):
                vi = T.axis.S(8, i)
                B[vi] = A[vi]
    assert [p.name for p in copy.params] == ["A", "B"]
    with pytest.raises(T.ShapeError, match=r"starts at its first element"):
        T.Buffer((4,), "float32", elem_offset=3)


def test_buffer_attributes_and_access_ptr():
    src = ('def f(A: T.Buffer((4, 16), "float32"), B: T.Buffer((64,), "float32")):\n'
           '    for i in range(4):\n        with T.block("b"):\n'
           '            vi = T.axis.S(4, i)\n            T.reads(A[vi, 0:16])\n'
           '            T.writes(B[vi * 16:vi * 16 + 16])\n'
           '            A_s = T.match_buffer(A[vi, 0:16], (16,))\n'
           '            for j in range(A_s.shape[0]):\n'
           '                B[vi * 16 + j] = A_s[j] + T.Cast("float32", A_s.elem_offset)\n')
    f = parse(src)
    a, b = rand(4, 16), np.zeros(64, "float32")
    T.interpret(f, a, b)
    np.testing.assert_allclose(b, (a + (np.arange(4) * 16)[:, None]).ravel())
    from cuvil_tir.parser.tvm_calls import make_pointer
    A, B = f.params
    # a box of the buffer is the region a T.call_extern argument receives
    assert str(make_pointer(B, "r", 4, 8, False).region) == "B[4:12]"
    assert str(make_pointer(A, "rw", 0, None, False).region) == "A[0:4, 0:16]"
    # a flat range of a 2-d buffer is no box: only the access_ptr op
    p = make_pointer(A, "r", 16, None, False)
    assert p.region is None
    assert str(p.call) == 'T.tvm_access_ptr(T.type_annotation("float32"), A.data, 16, 48, 1)'


@pytest.mark.parametrize("src,message", [
    ("def f(a: T.handle):\n    pass\n", r"parameter 'a: T.handle' is never matched"),
    ("def f(a: T.handle):\n    A = T.match_buffer(a, (4,), axis_separators=[1])\n",
     r"buffer A: axis_separators \[1\] must be increasing axes in 1\.\.0"),
    ("def f(a: T.handle):\n    A = T.match_buffer(a, (4, 4), axis_separators=1)\n",
     r"axis_separators: expected a list of ints such as \[1\], found 1"),
    ("def f(a: T.handle):\n    A = T.match_buffer(a, (4,), offset_factor=-2)\n",
     r"offset_factor: expected a non-negative int"),
    ("def f(a: T.handle):\n    A = T.match_buffer(a, (4,), elem_offset=2)\n",
     r"elem_offset=2: a Cuvil buffer starts at its first element"),
    ("def f(A: T.Buffer((4, 4), 'float32')):\n    with T.block('b'):\n"
     "        S = T.match_buffer(A[0:2, 0:4], (4, 2))\n",
     r"buffer S has extent 4 where the region A\[0:2, 0:4\] has 2"),
    ("def f(A: T.Buffer((4,), 'float32')):\n    x = A[0]\n    x += 1.0\n",
     r"expected a buffer element on the left of '\+='"),
    ("def f(A: T.Buffer((4,), 'float32')):\n    c = T.allocate_const([1.0, 2.0], 'float32', [4])\n",
     r"2 values for extents \[4\]"),
    ("def f(A: T.Buffer((4,), 'float32')):\n    A[0] = T.if_then_else(A[1] > 0.0, A[1], 1, "
     "dtype='int32')\n", r"dtype='int32'\): the branches have dtypes float32 and int32"),
])
def test_tvmscript_errors(src, message):
    with pytest.raises(T.ParseError, match=message):
        T.parse(src)


NEWER_TVM = '''
@T.prim_func(s_tir=True)
def main(p_a: T.handle, p_b: T.handle):
    """Newer TVM spellings: sblock, tuple size declarations, T.let, a docstring."""
    T.func_attr({"tir.noalias": True})
    n, m = T.int64(), T.int64()
    A = T.match_buffer(p_a, (n, m))
    B = T.match_buffer(p_b, (n, m))
    for (i, j) in T.grid(n, m):
        with T.sblock("B"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.sblock_attr({"note": 1})
            v: T.let[T.float32] = T.floor(A[vi, vj], dtype="float32")
            B[vi, vj] = v + T.float32(0.5)
'''


def test_newer_tvm_spellings():
    f = parse(NEWER_TVM)
    assert [str(s) for s in f.params[0].shape] == ["n", "m"] and f.params[0].shape[0].dtype == "int64"
    a, b = rand(3, 5) * 4, np.zeros((3, 5), "float32")
    T.interpret(f, a, b)
    np.testing.assert_allclose(b, np.floor(a) + 0.5)


def test_call_extern_in_tvm_argument_order():
    src = ('def f(A: T.Buffer((16,), "float32")):\n'
           '    T.evaluate(T.call_extern("fill", A.data, A.elem_offset, 16, dtype="int32"))\n')
    f = parse(src)
    call = f.body.value
    assert call.dtype == "int32" and call.args[0].value == "fill"
    assert str(call.args[2]) == "A[0:16]"


def test_a_module_flagged_as_the_namespace_stands_for_T():
    # what a TVM-named alias over Cuvil does (``from tvm.script import tir as T``)
    import types
    alias = types.ModuleType("tvm.script.tir")
    alias.__tvmscript_namespace__ = True
    f = T.parse('def f(A: T.Buffer((4,), "float32")):\n    A[0] = T.float32(1)\n',
                env={"T": alias})
    assert str(f.body) == "A[0] = T.float32(1)"
    unflagged = types.ModuleType("other")
    with pytest.raises(T.ParseError, match="has no attribute 'Buffer'|Buffer"):
        T.parse('def f(A: T.Buffer((4,), "float32")):\n    A[0] = T.float32(1)\n',
                env={"T": unflagged})


def _tvm_alias():
    import types
    alias = types.ModuleType("tvm.script.tir")
    alias.__tvmscript_namespace__ = True
    return alias


SCALE_BY_INDEX = ('def f(A: T.Buffer((4,), "float32")):\n'
                  '    for i in T.serial(4):\n'
                  '        A[i] = 10.0 * i + A[i]\n')


def test_tvm_dialect_promotes_an_integer_meeting_a_float_literal():
    # TVM's Python operators cast ``i`` to float32; Cuvil's own dialect asks for the cast
    f = T.parse(SCALE_BY_INDEX, env={"T": _tvm_alias()})
    assert 'T.Cast("float32", i)' in str(f.body)
    a = np.ones(4, "float32")
    T.interpret(f, a)
    np.testing.assert_array_equal(a, [1, 11, 21, 31])
    assert T.structural_equal(T.parse(str(f)), f)   # the cast is explicit: reads back
    with pytest.raises(T.ParseError, match="cannot combine the float literal 10.0 with an "
                                           "expression of dtype int32; write an int "
                                           "literal or cast the expression"):
        T.parse(SCALE_BY_INDEX)


def test_tvm_backend_builtins_are_opaque_extern_calls():
    src = ('def f(A: T.Buffer((16,), "float32")):\n'
           '    T.evaluate(T.tvm_fill_fragment(A.data, 16, 16, 16, 0, T.float32(0), '
           'dtype="handle"))\n')
    f = parse(src)
    call = f.body.value
    assert call.op == "call_extern" and call.args[0].value == "tvm_fill_fragment"
    assert call.dtype == "handle" and str(call.args[2]) == "A[0:16]"
    assert T.structural_equal(T.parse(str(f)), f)
    # no process defines the symbol: a build-time error, not a crash at the call
    with pytest.raises(targets.CodegenError, match="calls the external function "
                                                   "'tvm_fill_fragment', which no library"):
        targets.build(f, "llvm")
