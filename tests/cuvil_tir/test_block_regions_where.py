"""The declared-region check of an outer block bounds a predicated inner block by its
iter var domains (its T.where keeps the overshooting bindings of a split inside)."""

import numpy as np
import pytest

import cuvil_tir as T

TEXT = '''@T.prim_func
def main(X: T.Buffer((10,), "float32"), Y: T.Buffer((10,), "float32")):
    with T.block("Y_o"):
        T.reads(X[0:END])
        T.writes(Y[0:10])
        for i_0 in T.serial(3):
            for i_1 in T.serial(4):
                with T.block("Y"):
                    v_i = T.axis.spatial(10, i_0 * 4 + i_1)
                    T.where(i_0 * 4 + i_1 < 10)
                    T.reads(X[v_i])
                    T.writes(Y[v_i])
                    Y[v_i] = X[v_i] * T.float32(2)
'''


def test_a_predicated_inner_block_within_the_outer_region_parses():
    f = T.parse(TEXT.replace("END", "10"))
    assert T.structural_equal(T.parse(str(f)), f)
    x = np.arange(10, dtype="float32")
    y = np.zeros(10, "float32")
    T.interpret(f, x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_an_inner_block_beyond_the_outer_region_is_still_refused():
    with pytest.raises(T.ParseError, match=r"block 'Y_o' reads X\[v_i\] \(block 'Y'\) "
                       r"outside its declared T.reads\(X\[0:8\]\): dimension 0 reaches 9, "
                       r"past the declared end 7"):
        T.parse(TEXT.replace("END", "8"))


TILES = '''@T.prim_func
def main(X: T.Buffer((5,), "float32"), Y: T.Buffer((5,), "float32")):
    with T.block("Y_o"):
        T.reads(X[0:END])
        T.writes(Y[0:5])
        for i_0 in T.serial(3):
            with T.block("Y_t"):
                v_o = T.axis.spatial(3, i_0)
                T.reads(X[v_o * 2:v_o * 2 + 2])
                T.writes(Y[v_o * 2:v_o * 2 + 2])
                for i_1 in T.serial(2):
                    with T.block("Y"):
                        v_i = T.axis.spatial(2, i_1)
                        T.where(v_o * 2 + i_1 < 5)
                        T.reads(X[v_o * 2 + v_i])
                        T.writes(Y[v_o * 2 + v_i])
                        Y[v_o * 2 + v_i] = X[v_o * 2 + v_i] * T.float32(2)
'''


def test_an_inner_tile_overhanging_the_buffer_is_within_the_whole_buffer():
    # the last tile X[4:6] of a non-dividing split reaches past X's end, where nothing
    # is accessed: the outer X[0:5] covers it (nested blockize printed this, and it
    # did not parse back: issue 25, repro 17)
    f = T.parse(TILES.replace("END", "5"))
    assert T.structural_equal(T.parse(str(f)), f)
    y = np.zeros(5, "float32")
    T.interpret(f, np.arange(5, dtype="float32"), y)
    np.testing.assert_array_equal(y, np.arange(5) * 2)
    with pytest.raises(T.ParseError, match=r"block 'Y_o' reads X\[v_o \* 2:v_o \* 2 \+ 2\] "
                       r"\(block 'Y_t'\) outside its declared T.reads\(X\[0:4\]\)"):
        T.parse(TILES.replace("END", "4"))


LOOSE = '''@T.prim_func
def main(X: T.Buffer((8,), "float32"), Y: T.Buffer((8,), "float32")):
    with T.block("Y_o"):
        T.reads(X[0:END])
        T.writes(Y[0:3])
        for i_0 in T.serial(2):
            with T.block("Y_t"):
                v_o = T.axis.spatial(2, i_0)
                T.reads(X[v_o * 2:v_o * 2 + 2])
                T.writes(Y[v_o * 2:v_o * 2 + 2])
                for i_1 in T.serial(2):
                    with T.block("Y"):
                        v_i = T.axis.spatial(2, i_1)
                        T.where(v_o * 2 + i_1 < 3)
                        T.reads(X[v_o * 2 + v_i])
                        T.writes(Y[v_o * 2 + v_i])
                        Y[v_o * 2 + v_i] = X[v_o * 2 + v_i] * T.float32(2)
'''


def test_a_tile_declaring_more_than_its_inner_where_lets_run_is_checked_by_its_body():
    # Y_t's regions reach element 3 for v_o = 1, the T.where inside it stops at 2: what
    # runs stays in Y_o's regions (nested blockize, issue 25's fuzzer: CVL-E108)
    f = T.parse(LOOSE.replace("END", "3"))
    assert T.structural_equal(T.parse(str(f)), f)
    x = np.arange(8, dtype="float32")
    y = np.zeros(8, "float32")
    T.interpret(f, x, y)
    np.testing.assert_array_equal(y[:3], x[:3] * 2)
    assert not y[3:].any()


def test_a_tile_whose_body_leaves_the_outer_region_is_still_refused():
    with pytest.raises(T.ParseError, match=r"block 'Y_o' reads X\[v_o \* 2:v_o \* 2 \+ 2\] "
                       r"\(block 'Y_t'\) outside its declared T.reads\(X\[0:2\]\): "
                       r"dimension 0 reaches 3, past the declared end 1"):
        T.parse(LOOSE.replace("END", "2"))
