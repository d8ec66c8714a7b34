"""TVMScript's ``T.decl_buffer(..., data=...)`` and ``T.Buffer(..., data=...)``: an alias
of another buffer's memory (``data=A.data``) in another shape, and a buffer over a
handle parameter (``data=a``)."""

import numpy as np
import pytest

import cuvil_tir as T
import targets

ALIAS = '''
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((2, 4), "float32")):
    A2 = T.{decl}((2, 4), "float32", data=A.data)
    for i, j in T.grid(2, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A2[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = A2[vi, vj] * T.float32(2)
'''

SLICE = '''
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((2, 4), "float32")):
    A2 = T.decl_buffer((2, 4), "float32", data=A.data)
    with T.block("C"):
        T.reads(A2[1, 0:4])
        T.writes(C[0, 0:4])
        for j in range(4):
            C[0, j] = A2[1, j]
'''

ALIAS_READ = '''
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((2, 4), "float32")):
    for i, j in T.grid(2, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            T.reads(A[vi * 4 + vj])
            T.writes(C[vi, vj])
            C[vi, vj] = A[vi * 4 + vj] * T.float32(2)
'''

FLAT_WRITE = '''
def f(A: T.Buffer((8,), "float32"), C: T.Buffer((2, 4), "float32")):
    C2 = T.decl_buffer((8,), "float32", data=C.data)
    for k in range(8):
        with T.block("C"):
            vk = T.axis.remap("S", [k])
            T.reads(A[vk])
            T.writes(C2[vk:vk + 1])
            C2[vk] = A[vk] + T.float32(1)
'''


def _both(func, *arrays):
    """The results of the interpreter and of the llvm build on copies of ``arrays``."""
    a = [x.copy() for x in arrays]
    T.interpret(func, *a)
    b = [x.copy() for x in arrays]
    targets.build(func, "llvm")(*b)
    return a, b


@pytest.mark.parametrize("decl", ["decl_buffer", "Buffer"])
def test_an_alias_in_another_shape_reads_the_same_memory(decl):
    f = T.parse(ALIAS.format(decl=decl))
    assert T.structural_equal(f, T.parse(ALIAS_READ))
    x = np.arange(8, dtype="float32")
    for got in _both(f, x, np.zeros((2, 4), "float32")):
        np.testing.assert_array_equal(got[1], (x * 2).reshape(2, 4))


def test_a_slice_of_an_alias_is_the_box_of_memory_holding_it():
    f = T.parse(SLICE)
    assert [str(r) for r in f.body.block.body.block.reads] == ["A[4:8]"]
    x = np.arange(8, dtype="float32")
    for got in _both(f, x, np.zeros((2, 4), "float32")):
        np.testing.assert_array_equal(got[1][0], x[4:])


def test_a_flat_alias_of_a_matrix_writes_its_rows():
    f = T.parse(FLAT_WRITE)
    store = f.body.block.body.body.block.body
    assert str(store) == "C[vk // 4, vk % 4] = A[vk] + T.float32(1)"
    # the declared slice of the alias: the row of C holding it, whole
    assert [str(r) for r in f.body.block.body.body.block.writes] == \
        ["C[vk // 4, 0:4]"]
    x = np.arange(8, dtype="float32")
    for got in _both(f, x, np.zeros((2, 4), "float32")):
        np.testing.assert_array_equal(got[1], (x + 1).reshape(2, 4))
    assert T.structural_equal(T.parse(str(f)), f)


def test_a_buffer_over_a_handle_parameter_is_that_parameter():
    f = T.parse('''
def f(a: T.handle, C: T.Buffer((4,), "int32")):
    A = T.decl_buffer((4,), "int32", data=a)
    for i in range(4):
        C[i] = A[i] * 3
''')
    assert [p.name for p in f.params] == ["A", "C"]
    x = np.arange(4, dtype="int32")
    for got in _both(f, x, np.zeros(4, "int32")):
        np.testing.assert_array_equal(got[1], x * 3)


@pytest.mark.parametrize("decl, message", [
    ('T.decl_buffer((8,), "int32", data=A.data)',
     "A2: declared as int32 over the data of A, a float32 buffer; Cuvil does not "
     "reinterpret a buffer's bytes"),
    ('T.decl_buffer((3, 4), "float32", data=A.data)',
     "A2: declared with 12 elements over the data of A, which has 8; an alias may not "
     "reach past the memory it aliases"),
    ('T.decl_buffer((2, 4), "float32", data=A.data, strides=[8, 1])',
     r"A2: an alias of A's data takes no \['strides'\]"),
    ('T.decl_buffer((2, 4), "float32", data=3)',
     "A2: data= must be a buffer's data \\(A.data\\), a handle parameter or the result of "
     "T.allocate or T.allocate_const, found 3"),
])
def test_bad_aliases_are_parse_errors(decl, message):
    src = ('def f(A: T.Buffer((8,), "float32")):\n'
           f'    A2 = {decl}\n'
           '    A2[0] = T.float32(1)\n')
    with pytest.raises(T.ParseError, match=message):
        T.parse(src)


def test_a_buffer_over_a_handle_inside_a_block_is_refused():
    src = ('def f(a: T.handle):\n'
           '    with T.block("root"):\n'
           '        A = T.decl_buffer((4,), "int32", data=a)\n'
           '        A[0] = 1\n')
    with pytest.raises(T.ParseError, match="T.match_buffer of a handle belongs at the top "
                       "of the function body"):
        T.parse(src)
