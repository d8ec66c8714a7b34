"""TVMScript of TVM's GPU tests read by Cuvil: unnamed blocks, thread environments,
T.allocate statements and buffers over another buffer's data, f-strings in
annotations, TVM's expression-node constructors, and under-stated regions in TVM's
dialect."""

import sys
import types

import pytest

import cuvil_tir as T
from cuvil_tir.stmt import Allocate, BlockRealize, For


def _tvm_namespace():
    # a TVM-named alias of Cuvil's namespace, as the TVM suites install it
    mod = types.ModuleType("tvm_like_tir")
    mod.__tvmscript_namespace__ = True
    mod.__getattr__ = lambda name: getattr(T, name)
    return mod


def _inner_realize(f):
    found = []
    T.post_order_visit(f.body, lambda n: found.append(n) if isinstance(n, BlockRealize)
                       else None)
    return found[0]          # post order: the innermost block first


def test_unnamed_block_parses_prints_and_round_trips():
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block():
            A[i] = T.float32(1)
''')
    blk = _inner_realize(f).block
    assert blk.name == ""
    assert "with T.block():" in str(f)
    assert T.structural_equal(T.parse(str(f)), f)


def test_block_with_two_names_is_refused():
    with pytest.raises(T.ParseError, match="T.block expects the block's name"):
        T.parse('def f(A: T.Buffer((8,), "float32")):\n'
                '    with T.block("a", "b"):\n        A[0] = T.float32(1)\n')


def test_env_thread_and_launch_thread_statement():
    f = T.parse('''
def f(A: T.Buffer((8, 4), "float32")):
    tx = T.env_thread("threadIdx.x")
    bx = T.env_thread("blockIdx.x")
    T.launch_thread(bx, 8)
    T.launch_thread(tx, 4)
    A[bx, tx] = T.float32(1)
''')
    assert isinstance(f.body, For) and f.body.thread_tag == "blockIdx.x"
    inner = f.body.body
    assert inner.thread_tag == "threadIdx.x" and inner.extent.value == 4
    assert str(inner.body) == "A[bx, tx] = T.float32(1)"


def test_env_thread_needs_a_tag():
    with pytest.raises(T.ParseError, match="T.env_thread expects a thread tag"):
        T.parse('def f(A: T.Buffer((8,), "float32")):\n    tx = T.env_thread(3)\n'
                '    A[0] = T.float32(1)\n')


def test_allocate_statement_and_buffer_over_its_data():
    f = T.parse('''
def f(A: T.Buffer((16,), "float32")):
    T.launch_thread("blockIdx.x", 1)
    B = T.allocate([16], "float32", "shared.dyn")
    tx = T.launch_thread("threadIdx.x", 16)
    B_1 = T.Buffer((16,), data=B, scope="shared.dyn")
    B_1[tx] = A[tx]
    A[tx] = B_1[15 - tx]
''')
    allocs = []
    T.post_order_visit(f.body, lambda n: allocs.append(n) if isinstance(n, Allocate) else None)
    assert [a.buffer.scope for a in allocs] == ["shared"]     # shared.dyn is shared
    assert "B[tx] = A[tx]" in str(f)


def test_buffer_over_another_buffers_data_is_a_reshaped_view():
    f = T.parse('''
def f(A: T.Buffer((4, 4), "float32"), E: T.Buffer((4, 4), "float32")):
    A_1 = T.Buffer((16,), data=A.data)
    E_1 = T.Buffer((16,), data=E.data)
    for i in range(16):
        E_1[i] = A_1[15 - i]
''')
    import numpy as np
    a = np.arange(16, dtype="float32").reshape(4, 4)
    e = np.zeros((4, 4), "float32")
    T.interpret(f, a, e)
    np.testing.assert_array_equal(e, a.reshape(-1)[::-1].reshape(4, 4))


def test_buffer_over_allocated_data_in_another_shape_is_an_alias():
    f = T.parse('''
def f(A: T.Buffer((8,), "float32")):
    B = T.allocate([8], "float32", "global")
    B_2d = T.Buffer((2, 4), data=B)
    for i, j in T.grid(2, 4):
        B_2d[i, j] = A[i * 4 + j]
    for k in range(8):
        A[k] = B[7 - k]
''')
    import numpy as np
    a = np.arange(8, dtype="float32")
    T.interpret(f, a)
    np.testing.assert_array_equal(a, np.arange(8, dtype="float32")[::-1])


def test_data_must_be_memory():
    with pytest.raises(T.ParseError, match="data= must be a buffer's data"):
        T.parse('def f(A: T.Buffer((4, 4), "float32")):\n'
                '    A_1 = T.Buffer((16,), data=3)\n    A_1[0] = T.float32(0)\n')


def test_fstring_in_block_annotation_reads_the_functions_scope():
    suffix = "shared_dyn"
    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("b"):
            T.block_attr({"intrin": f"wmma_load_a_{suffix}", "r": f"{suffix!r}"})
            A[i] = T.float32(1)
''', env={"T": T, "suffix": suffix})
    ann = dict(_inner_realize(f).block.annotations)
    assert ann == {"intrin": "wmma_load_a_shared_dyn", "r": "'shared_dyn'"}


def test_fstring_placeholder_must_be_a_name():
    with pytest.raises(T.ParseError, match="an f-string placeholder must be a name"):
        T.parse('def f(A: T.Buffer((4,), "float32")):\n'
                '    with T.block("b"):\n        T.block_attr({"k": f"{1 + 2}"})\n'
                '        A[0] = T.float32(1)\n')


def test_tvm_node_constructors():
    f = T.parse('''
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block():
            T.where(T.Mul(0, 128) + i < 3)
            A[T.Add(i, 0)] = T.float32(1)
''')
    br = _inner_realize(f)
    assert type(br.predicate.a.a).__name__ == "Mul"      # kept as written, unfolded
    with pytest.raises(T.ParseError, match="T.Add expects 2 operands"):
        T.parse('def f(A: T.Buffer((4,), "float32")):\n    A[T.Add(1)] = T.float32(1)\n')


UNDERSTATED = '''
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"),
      C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block():
            T.reads(A[i])
            T.writes(C[i])
            C[i] = A[i] + B[i]
'''


def test_understated_regions_are_widened_in_tvms_dialect_only():
    with pytest.raises(T.ParseError, match="does not name buffer 'B'"):
        T.parse(UNDERSTATED)
    ns = _tvm_namespace()
    sys.modules.setdefault("tvm_like_tir", ns)
    f = T.parse(UNDERSTATED, env={"T": ns})
    reads = [str(r) for r in _inner_realize(f).block.reads]
    assert reads == ["A[i]", "B[i]"]
