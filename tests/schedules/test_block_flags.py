"""Block flags (affine binding, region cover, stage pipeline): our own cases, each
with the exact flags expected, and the errors of the public entry point."""

import pytest

import cuvil_tir as T
import schedules as S
from schedules.block_flags import BlockFlags
from schedules.errors import ScheduleArgumentError

OK = BlockFlags(True, True, True)

HEADER = '''@T.prim_func
def main(A: T.Buffer((12,), "float32"), C: T.Buffer((12,), "float32")):
    B = T.alloc_buffer((12,), "float32")
'''


def _halves(first: int, second_start: int):
    """B written by two blocks, [0, first) and [second_start, 12); C reads all of B."""
    return T.parse(HEADER + f'''    for i in T.serial({first}):
        with T.block("lo"):
            vi = T.axis.spatial({first}, i)
            B[vi] = A[vi] * 2.0
    for i in T.serial({12 - second_start}):
        with T.block("hi"):
            vi = T.axis.spatial(12, i + {second_start})
            B[vi] = A[vi] * 3.0
    for i in T.serial(12):
        with T.block("C"):
            vi = T.axis.spatial(12, i)
            C[vi] = B[vi] + 1.0
''')


def test_a_two_stage_pipeline_has_every_flag():
    A = T.placeholder((6, 5), name="A")
    B = T.compute((6, 5), lambda i, j: A[i, j] * 2.0, name="B")
    f = T.create_prim_func([A, T.compute((6, 5), lambda i, j: B[i, j] - 1.0, name="C")])
    assert [S.block_flags(f, b) for b in ("root", "B", "C")] == [OK, OK, OK]


def test_two_producers_meeting_cover_the_consumer():
    f = _halves(6, 6)
    assert S.block_flags(f, "C") == OK
    assert S.block_flags(f, "root") == OK


def test_a_hole_between_two_producers_breaks_cover_and_the_pipeline():
    f = _halves(5, 6)                  # B[5] is never written
    assert S.block_flags(f, "C") == BlockFlags(True, False, True)
    assert S.block_flags(f, "root") == BlockFlags(True, True, False)
    assert S.block_flags(f, "lo") == OK


def _shift(read: str):
    """B then C under one loop; C reads ``read`` of B (guarded)."""
    return T.parse(f'''@T.prim_func
def main(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    B = T.alloc_buffer((10,), "float32")
    for i in T.serial(10):
        with T.block("B"):
            vi = T.axis.spatial(10, i)
            B[vi] = A[vi] + 1.0
        with T.block("C"):
            vi = T.axis.spatial(10, i)
            T.reads(B[{read}])
            C[vi] = T.if_then_else(vi > 0, B[{read}], 0.0)
''')


def test_reading_the_previous_iteration_is_not_covered():
    f = _shift("vi - 1")
    assert S.block_flags(f, "C") == BlockFlags(True, False, True)
    assert S.block_flags(f, "root") == BlockFlags(True, True, False)


def test_a_same_iteration_read_under_a_shared_loop_is_covered():
    f = _shift("vi")
    assert [S.block_flags(f, b) for b in ("root", "B", "C")] == [OK, OK, OK]


def _tiles(width: int):
    """B written in 4-wide tiles by a block holding a block, ``width`` of each tile
    really written; C reads all of B."""
    return T.parse(f'''@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for i in T.serial(4):
        with T.block("B"):
            vi = T.axis.spatial(4, i)
            T.reads(A[vi * 4:vi * 4 + {width}])
            T.writes(B[vi * 4:vi * 4 + {width}])
            for ii in T.serial({width}):
                with T.block("B_in"):
                    vii = T.axis.spatial({width}, ii)
                    B[vi * 4 + vii] = A[vi * 4 + vii] * 2.0
    for i in T.serial(16):
        with T.block("C"):
            vi = T.axis.spatial(16, i)
            C[vi] = B[vi] + 1.0
''')


def test_tiles_that_touch_cover_and_tiles_with_gaps_do_not():
    full, gappy = _tiles(4), _tiles(3)
    assert [S.block_flags(full, b) for b in ("root", "B", "B_in", "C")] == [OK] * 4
    assert S.block_flags(gappy, "C") == BlockFlags(True, False, True)
    assert S.block_flags(gappy, "root").stage_pipeline is False
    assert S.block_flags(gappy, "B") == OK        # its own scope: B_in alone


def test_digits_of_a_fused_loop_write_a_whole_box():
    f = T.parse('''@T.prim_func
def main(A: T.Buffer((3, 4), "float32"), C: T.Buffer((3, 4), "float32")):
    B = T.alloc_buffer((3, 4), "float32")
    for f in T.serial(12):
        with T.block("B"):
            vi = T.axis.spatial(3, f // 4)
            vj = T.axis.spatial(4, f % 4)
            B[vi, vj] = A[vi, vj] + 1.0
    for i, j in T.grid(3, 4):
        with T.block("C"):
            vi, vj = T.axis.remap("SS", [i, j])
            C[vi, vj] = B[vi, vj] * 2.0
''')
    assert [S.block_flags(f, b) for b in ("root", "B", "C")] == [OK, OK, OK]


WINDOW = '''@T.prim_func
def main(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((16,), "float32")
    for t in T.serial(4):
        for a in T.serial(6):
            with T.block("B"):
                vb = T.axis.spatial(16, t * 4 - 1 + a)
                T.where(1 <= t * 4 + a and t * 4 + a < 17)
                B[vb] = A[vb]
        for c, k in T.grid(4, 3):
            with T.block("C"):
                vc = T.axis.spatial(16, t * 4 + c)
                vk = T.axis.reduce(3, k)
                T.reads(B[vc + vk - 1])
                with T.init():
                    C[vc] = 0.0
                C[vc] = C[vc] + T.if_then_else(1 <= vc + vk and vc + vk < 17,
                                               B[vc + vk - 1], 0.0)
'''


def test_a_predicate_cut_to_the_buffer_still_covers_a_clipped_window():
    # the producer writes B[t*4 - 1 .. t*4 + 4] minus what lies outside B; the
    # consumer's window reads the same, clipped to B's shape
    f = T.parse(WINDOW)
    assert [S.block_flags(f, b) for b in ("root", "B", "C")] == [OK, OK, OK]


@pytest.mark.parametrize("old, new", [
    ("1 <= t * 4 + a and", "2 <= t * 4 + a and"),     # B[0] never written
    ("t * 4 + a < 17", "t * 4 + a < 16"),             # B[15] never written
    ("for a in T.serial(6)", "for a in T.serial(5)"),  # each window's last one
])
def test_a_predicate_or_window_short_of_the_reads_is_not_covered(old, new):
    f = T.parse(WINDOW.replace(old, new))
    assert S.block_flags(f, "C") == BlockFlags(True, False, True)


def test_non_affine_and_strided_bindings_are_flagged():
    f = T.parse('''@T.prim_func
def main(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"),
         C: T.Buffer((16,), "float32")):
    for i in T.serial(4):
        with T.block("sq"):
            vi = T.axis.spatial(16, i * i)
            B[vi] = A[vi]
    for i in T.serial(8):
        with T.block("even"):
            vi = T.axis.spatial(16, i * 2)
            C[vi] = A[vi]
''')
    assert S.block_flags(f, "sq").affine_binding is False
    assert S.block_flags(f, "even").affine_binding is False


def _threads(scope: str, tag: str = "threadIdx.x"):
    """B of ``scope`` written per thread by rows, read back by columns."""
    return T.parse(f'''@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    B = T.alloc_buffer((8, 8), "float32", scope="{scope}")
    for t in T.thread_binding(8, thread="{tag}"):
        for j in T.serial(8):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [t, j])
                B[vi, vj] = A[vi, vj] * 2.0
        for j in T.serial(8):
            with T.block("C"):
                vi, vj = T.axis.remap("SS", [t, j])
                C[vj, vi] = B[vj, vi] + 1.0
''')


def test_threads_share_a_shared_buffer_but_not_a_local_one():
    assert S.block_flags(_threads("shared"), "C") == OK
    assert S.block_flags(_threads("local"), "C") == BlockFlags(True, False, True)
    # a warp buffer is shared by the lanes of a warp (threadIdx.x), not across warps
    assert S.block_flags(_threads("warp"), "C") == OK
    assert S.block_flags(_threads("warp", "threadIdx.y"), "C") == \
        BlockFlags(True, False, True)


def test_flags_of_a_schedule_follow_its_current_function():
    sch = S.Schedule(_halves(6, 6))
    sch.split(sch.get_loops("C")[0], [3, 4])
    assert S.block_flags(sch, "C") == OK
    assert S.block_flags(sch, S.BlockRV("root")) == OK


def test_block_flags_errors_name_what_was_expected():
    with pytest.raises(ScheduleArgumentError, match=r"block_flags: expected a PrimFunc or "
                       r"a Schedule, found str"):
        S.block_flags("main", "C")
    with pytest.raises(ScheduleArgumentError, match=r"block_flags: Cannot find a block with the name: D"):
        S.block_flags(_halves(6, 6), "D")


def test_output_blocks_are_the_writers_of_parameters():
    f = _halves(6, 6)
    assert [S.is_output_block(f, b) for b in ("lo", "hi", "C")] == [False, False, True]
    sch = S.Schedule(f)
    copy = sch.cache_write("C", 0, "local")
    # the copy back to C is the output block now; C itself writes the cache
    assert S.is_output_block(sch, "C") is False
    assert S.is_output_block(sch, copy) is True
    with pytest.raises(ScheduleArgumentError, match=r"is_output_block: expected a PrimFunc "
                       r"or a Schedule, found list"):
        S.is_output_block([], "C")
