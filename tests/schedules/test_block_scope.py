"""The dependence graph of a scope: exact dependences of our own programs, and the
errors of its queries."""

import pytest

import cuvil_tir as T
import schedules as S
from schedules.block_scope import DepKind
from schedules.errors import ScheduleArgumentError

CHAIN = '''@T.prim_func
def main(A: T.Buffer((6,), "float32"), B: T.Buffer((6,), "float32"),
         D: T.Buffer((6,), "float32")):
    C = T.alloc_buffer((6,), "float32")
    for i in T.serial(6):
        with T.block("read_B"):
            vi = T.axis.spatial(6, i)
            C[vi] = B[vi] + A[vi]
    for i in T.serial(6):
        with T.block("write_B"):
            vi = T.axis.spatial(6, i)
            B[vi] = A[vi] * 2.0
    for i in T.serial(6):
        with T.block("use_both"):
            vi = T.axis.spatial(6, i)
            D[vi] = B[vi] + C[vi]
'''


def _deps(scope):
    return [(d.src.name, d.kind.value, d.dst.name, d.buffers) for d in scope.deps]


def test_read_write_and_overwrite_dependences_in_program_order():
    scope = S.block_scope(T.parse(CHAIN))
    assert [c.name for c in scope.children] == ["read_B", "write_B", "use_both"]
    assert _deps(scope) == [
        ("read_B", "WAR", "write_B", ("B",)),
        ("write_B", "RAW", "use_both", ("B",)),   # D = B + C reads B first
        ("read_B", "RAW", "use_both", ("C",)),
    ]
    assert [str(d) for d in scope.deps_by_src("read_B")] == \
        ["read_B -WAR-> write_B", "read_B -RAW-> use_both"]
    assert [str(d) for d in scope.deps_by_dst(S.BlockRV("use_both"))] == \
        ["write_B -RAW-> use_both", "read_B -RAW-> use_both"]
    # overwriting what an earlier stage read: not a stage pipeline
    flags = S.block_flags(T.parse(CHAIN), "root")
    assert (flags.region_cover, flags.stage_pipeline) == (True, False)


def test_an_init_block_and_its_update_depend_twice():
    from cuvil_tir.te.examples import matmul
    sch = S.Schedule(matmul(4, 4, 4))
    sch.decompose_reduction("C", sch.get_loops("C")[1])
    scope = S.block_scope(sch)
    assert _deps(scope) == [("C_init", "RAW", "C_update", ("C",)),
                            ("C_init", "WAW", "C_update", ("C",))]
    assert all(d.kind in (DepKind.RAW, DepKind.WAW) for d in scope.deps_by_src("C_init"))
    # the update reads and writes C itself: no dependence on itself
    assert scope.deps_by_src("C_update") == []


def test_the_scope_of_an_inner_block_holds_its_children_only():
    A = T.placeholder((8,), name="A")
    B = T.compute((8,), lambda i: A[i] * 2.0, name="B")
    sch = S.Schedule(T.create_prim_func([A, T.compute((8,), lambda i: B[i], name="C")]))
    sch.blockize(sch.get_loops("B")[0])
    scope = S.block_scope(sch, "B_o")
    assert [c.name for c in scope.children] == ["B"] and scope.deps == ()
    assert [str(d) for d in S.block_scope(sch).deps] == ["B_o -RAW-> C"]


def test_scope_queries_refuse_a_block_outside_the_scope():
    scope = S.block_scope(T.parse(CHAIN))
    with pytest.raises(ScheduleArgumentError, match=r"BlockScope.deps_by_src: block 'root' "
                       r"is not a child of scope 'root'; its children are \['read_B', "
                       r"'write_B', 'use_both'\]"):
        scope.deps_by_src("root")
    with pytest.raises(ScheduleArgumentError, match=r"BlockScope.deps_by_dst: block 'nope'"):
        scope.deps_by_dst(S.BlockRV("nope"))
    with pytest.raises(ScheduleArgumentError, match=r"block_scope: expected a PrimFunc or a "
                       r"Schedule, found int"):
        S.block_scope(3)


def test_producers_and_consumers_are_the_read_after_write_dependences():
    sch = S.Schedule(T.parse(CHAIN))
    # write_B writes B only after read_B has read it: not its producer
    assert sch.get_producers("read_B") == []
    assert sch.get_consumers("write_B") == [S.BlockRV("use_both")]
    assert sch.get_producers("use_both") == [S.BlockRV("read_B"), S.BlockRV("write_B")]
    assert sch.get_consumers("read_B") == [S.BlockRV("use_both")]
