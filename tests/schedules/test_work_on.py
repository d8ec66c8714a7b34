"""Scheduling one function of a module of several (TVM's ``work_on``), and
``get_block`` called TVM's ways (``name=`` by keyword, ``func_name=``)."""

import numpy as np
import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import WorkOnError
from tests.schedules.testing import assert_refused, run

A = T.placeholder((8,), name="A")
ADD = T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0, name="B")]) \
    .with_attr("global_symbol", "add_one")
DBL = T.create_prim_func([A, T.compute((8,), lambda i: A[i] * 2.0, name="B")]) \
    .with_attr("global_symbol", "double")
MOD = T.IRModule((ADD, DBL))

SPLIT_DOUBLE = '''
@T.prim_func
def double(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"global_symbol": "double"})
    for i_0, i_1 in T.grid(2, 4):
        with T.block("B"):
            vi = T.axis.spatial(8, i_0 * 4 + i_1)
            B[vi] = A[vi] * T.float32(2)
'''


def test_get_block_by_keyword_name():
    sch = S.Schedule(ADD)
    assert sch.get_block(name="B") == S.BlockRV("B")
    assert sch.get_block(name="B", func_name="add_one") == S.BlockRV("B")
    assert "get_block('B')" in str(sch.trace)


def test_a_module_of_one_function_is_worked_on_without_work_on():
    sch = S.Schedule(T.IRModule((DBL,)))
    assert sch.func_working_on == "double"
    sch.split(sch.get_loops("B")[0], [2, 4])
    assert T.structural_equal(sch.func, T.parse(SPLIT_DOUBLE))


def test_work_on_schedules_that_function_only():
    sch = S.Schedule(MOD)
    assert sch.func_working_on is None
    sch.work_on("double")
    sch.split(sch.get_loops(sch.get_block("B"))[0], [2, 4])
    assert sch.mod["add_one"] is ADD
    assert T.structural_equal(sch.mod["double"], T.parse(SPLIT_DOUBLE))
    assert sch.func is sch.mod["double"]
    x = np.arange(8, dtype="float32")
    np.testing.assert_array_equal(run(sch.func, [x, np.zeros(8, "float32")])[1], x * 2)


def test_handles_keep_their_function_after_work_on():
    sch = S.Schedule(MOD)
    sch.work_on("add_one")
    b_add = sch.get_block("B")
    (i_add,) = sch.get_loops(b_add)
    sch.work_on("double")
    b_dbl = sch.get_block("B")
    assert b_add != b_dbl
    assert b_add.func == "add_one" and b_dbl.func == "double"
    sch.split(i_add, [4, 2])          # acts on add_one, though double is worked on
    assert len(sch.get_loops(b_add)) == 2 and len(sch.get_loops(b_dbl)) == 1
    assert sch.get(b_dbl) is sch.mod["double"].body.block.body.body.block


def test_get_block_of_another_function_by_func_name():
    sch = S.Schedule(MOD)
    sch.work_on("add_one")
    b = sch.get_block("B", func_name="double")
    sch.parallel(sch.get_loops(b)[0])
    assert sch.mod["add_one"] is ADD
    assert sch.mod["double"].body.block.body.kind == "parallel"
    assert sch.func_working_on == "add_one"


def test_trace_of_a_module_replays_on_the_module():
    sch = S.Schedule(MOD)
    sch.work_on("double")
    sch.split(sch.get_loops("B")[0], [2, 4])
    sch.reorder(*reversed(sch.get_loops(sch.get_block("B", func_name="double"))))
    text = str(sch.trace)
    assert "sch.work_on('double')" in text
    assert "func_name='double'" in text
    replayed = S.Trace.from_json(sch.trace.as_json()).apply(MOD)
    for name in ("add_one", "double"):
        assert T.structural_equal(replayed.mod[name], sch.mod[name])
    assert replayed.trace.as_json() == sch.trace.as_json()


def test_main_is_worked_on_by_default():
    mod = T.IRModule((ADD, DBL.with_attr("global_symbol", "main")))
    sch = S.Schedule(mod)
    assert sch.func_working_on == "main"
    assert sch.get_block("B").func == "main"


def test_get_block_before_work_on_is_refused():
    sch = S.Schedule(MOD)
    with pytest.raises(ValueError, match="does not know which function to be working "
                       "on: the module has the functions 'add_one', 'double'"):
        sch.get_block(name="B")
    with pytest.raises(WorkOnError, match="call sch.work_on"):
        _ = sch.func


def test_work_on_an_unknown_function_is_refused():
    sch = S.Schedule(MOD)
    sch.work_on("add_one")
    assert_refused(sch, lambda: sch.work_on("triple"),
                   "the module has no function 'triple'; its functions are 'add_one', "
                   "'double'", WorkOnError)
    assert_refused(sch, lambda: sch.get_block("B", func_name="triple"),
                   "no function 'triple'", WorkOnError)
    with pytest.raises(WorkOnError, match="expected one function name"):
        sch.work_on(3)


def test_handles_of_two_functions_in_one_primitive_are_refused():
    sch = S.Schedule(MOD)
    (i_add,) = sch.get_loops(sch.get_block("B", func_name="add_one"))
    (i_dbl,) = sch.get_loops(sch.get_block("B", func_name="double"))
    sch.work_on("double")
    assert_refused(sch, lambda: sch.fuse(i_add, i_dbl),
                   "its handles point into several functions \\('add_one', 'double'\\)",
                   WorkOnError)


def test_get_block_primitive_checks_the_function_it_is_given():
    from schedules.primitive import PRIMITIVES
    with pytest.raises(WorkOnError, match="asked for a block of function 'double' in "
                       "function 'add_one'"):
        PRIMITIVES["get_block"](ADD, "B", func_name="double")


def test_a_schedule_of_something_else_is_refused():
    with pytest.raises(S.ScheduleError, match="expected a PrimFunc .* or an IRModule, "
                       "got str"):
        S.Schedule("main")
