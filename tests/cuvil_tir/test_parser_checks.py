"""What the parser checks and infers beyond syntax: literal ranges, buffer shapes,
declared block regions against the body, inferred regions of nested blocks."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from cuvil_tir.block_regions import infer_block_regions
from cuvil_tir.region_check import check_block_regions

UNDER_STATED = '''
@T.prim_func
def main(A: T.Buffer((9,), "float32"), C: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((9,), "float32")
    for i in T.serial(9):
        with T.block("B"):
            vi = T.axis.spatial(9, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi] * T.float32(2)
    for i in T.serial(8):
        with T.block("C"):
            vi = T.axis.spatial(8, i)
            T.reads(B[vi])
            T.writes(C[vi])
            C[vi] = B[vi + 1]
'''


def test_buffer_with_an_int_shape_in_the_decorator():
    # before: a raw TypeError ("'int' object is not iterable") when the def ran
    @T.prim_func
    def f(A: T.Buffer(16, "float32")):
        for i in T.serial(16):
            A[i] = T.float32(0)
    assert [s.value for s in f.params[0].shape] == [16]
    assert T.Buffer(4, "int8", name="X").shape[0].value == 4
    with pytest.raises(T.ShapeError, match=r"expected a shape such as \(16,\) or 16"):
        T.Buffer("16", "float32")


def test_out_of_range_literal_in_the_text_form_is_a_parse_error():
    src = "def f(A: T.Buffer((4,), 'int8')):\n    A[0] = A[1] + 300\n"
    with pytest.raises(T.ParseError, match=r"2:17: the literal 300 does not fit int8"):
        T.parse(src)
    with pytest.raises(T.ParseError, match=r"integer 200 does not fit int8"):
        T.parse("def f(A: T.Buffer((4,), 'int8')):\n    A[0] = T.int8(200)\n")


def test_under_stated_reads_are_a_parse_error_at_the_declaration():
    # before: accepted, and compute_at then computed B for one element per iteration
    with pytest.raises(T.ParseError) as info:
        T.parse(UNDER_STATED)
    err = info.value
    assert err.line == 14 and "T.reads(B[vi])" in err.source_line
    assert "reads B[vi + 1] outside its declared T.reads(B[vi])" in err.message
    assert "past the declared end vi" in err.message


@pytest.mark.parametrize("reads,writes,body,message", [
    ("T.reads(A[vi])", "T.writes(B[vi])", "B[vi] = A[vi] + C[vi]",
     r"reads C\[vi\] but its T.reads\(...\) does not name buffer 'C'"),
    ("T.reads(A[vi], C[vi])", "T.writes(B[vi])", "B[vi + 1] = A[vi] + C[vi]",
     r"writes B\[vi \+ 1\] outside its declared T.writes\(B\[vi\]\)"),
    ("T.reads(A[vi:vi + 2], C[vi])", "T.writes(B[vi])", "B[vi] = A[vi - 1] + C[vi]",
     r"starts at vi - 1, before the declared start vi"),
])
def test_declared_regions_checked_against_the_body(reads, writes, body, message):
    src = (f"def f(A: T.Buffer((9,), 'float32'), B: T.Buffer((9,), 'float32'), "
           f"C: T.Buffer((9,), 'float32')):\n"
           f"    for i in T.serial(1, 8):\n        with T.block('B'):\n"
           f"            vi = T.axis.spatial((1, 8), i)\n            {reads}\n"
           f"            {writes}\n            {body}\n")
    with pytest.raises(T.ParseError, match=message):
        T.parse(src)


def test_correct_or_over_stated_regions_are_accepted():
    src = UNDER_STATED.replace("T.reads(B[vi])", "T.reads(B[vi:vi + 2])")
    f = T.parse(src)
    T.parse(src.replace("T.reads(B[vi:vi + 2])", "T.reads(B[0:9])"))
    # a guarded access may stay inside a smaller region: not reported
    g = T.parse("def f(A: T.Buffer((8,), 'float32'), B: T.Buffer((8,), 'float32')):\n"
                "    for i in T.serial(8):\n        with T.block('B'):\n"
                "            vi = T.axis.spatial(8, i)\n            T.reads(A[0:7])\n"
                "            T.writes(B[vi])\n"
                "            B[vi] = T.if_then_else(vi < 7, A[vi], T.float32(0))\n")
    assert g.name == "f"
    sch = S.Schedule(f)
    sch.compute_at(sch.get_block("B"), sch.get_loops(sch.get_block("C"))[0])
    a = np.arange(9, dtype="float32")
    c = np.zeros(8, "float32")
    T.interpret(sch.func, a, c)
    np.testing.assert_allclose(c, 2 * a[1:])


def test_schedule_refuses_a_function_whose_regions_under_state_the_body():
    f = T.parse(UNDER_STATED.replace("T.reads(B[vi])", "T.reads(B[vi:vi + 2])"))
    blk_c = f.body.block.body.seq[1].body.block
    bad = T.Block(blk_c.name, blk_c.iter_vars,
                  (T.BufferRegion(blk_c.reads[0].buffer,
                                  (T.Range(blk_c.iter_vars[0].var, T.const(1)),)),),
                  blk_c.writes, blk_c.body)
    with pytest.raises(T.LoweringError, match=r"block 'C' reads B\[vi \+ 1\] outside"):
        check_block_regions(bad)
    g = T.parse(UNDER_STATED.replace("T.reads(B[vi])", "T.reads(B[vi:vi + 2])"))
    import dataclasses
    loop_c = g.body.block.body.seq[1]
    realize = dataclasses.replace(loop_c.body, block=bad)
    body = T.SeqStmt((g.body.block.body.seq[0], dataclasses.replace(loop_c, body=realize)))
    h = dataclasses.replace(g, body=dataclasses.replace(
        g.body, block=dataclasses.replace(g.body.block, body=body)))
    with pytest.raises(T.LoweringError, match=r"declared T.reads\(B\[vi\]\)"):
        S.Schedule(h)


NESTED = '''
def f(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16,), "float32")):
    for io in T.serial(4):
        with T.block("outer"):
            vo = T.axis.spatial(4, io)
            for ii, k in T.grid(4, 4):
                with T.block("inner"):
                    vi = T.axis.spatial(16, vo * 4 + ii)
                    vk = T.axis.reduce(4, k)
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]
'''


def test_implicit_regions_of_a_block_with_blocks_are_relaxed_over_inner_iterators():
    # before: the outer block read A[vi, vk], naming the inner block's variables
    f = T.parse(NESTED)
    outer = f.body.block.body.body.block
    assert [str(r) for r in outer.reads] == ["A[vo * 4:vo * 4 + 4, 0:4]"]
    assert [str(w) for w in outer.writes] == ["B[vo * 4:vo * 4 + 4]"]
    g = T.parse(str(f))
    assert T.structural_equal(f, g)
    a = np.random.default_rng(0).standard_normal((16, 4)).astype("float32")
    b = np.zeros(16, "float32")
    T.interpret(f, a, b)
    np.testing.assert_allclose(b, a.sum(1), rtol=1e-5)


def test_written_buffer_leaves_implicit_reads_only_with_an_init():
    src = ("def f(B: T.Buffer((4,), 'float32')):\n    for i in T.serial(4):\n"
           "        with T.block('B'):\n            vi = T.axis.spatial(4, i)\n"
           "            B[vi] = B[vi] + T.float32(1)\n")
    blk = T.parse(src).body.block.body.body.block
    assert [str(r) for r in blk.reads] == ["B[vi]"]
    inner = T.parse(NESTED).body.block.body.body.block.body.body.body.block
    assert [str(r) for r in inner.reads] == ["A[vi, vk]"]
    assert infer_block_regions(inner)[0] == inner.reads
