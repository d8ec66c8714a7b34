"""How much a refusal's message says: Schedule(error_render="detail" | "fast" | "none")."""

import pytest

import cuvil_tir as T
import schedules as S
from schedules.errors import (BlockNotFoundError, ScheduleArgumentError, condense,
                              summary)
from tests import workloads
from tests.schedules.testing import assert_refused


def scaled():
    X = T.placeholder((8, 8), name="X")
    return T.create_prim_func([X, T.compute((8, 8), lambda i, j: X[i, j] * 2.0, name="Y")])


def test_detail_names_the_block_and_renders_the_ir():
    sch = S.Schedule(workloads.matmul(4, 4, 4).func)
    with pytest.raises(BlockNotFoundError, match=r"get_block: Cannot find a block with the "
                       r"name: D; the function has the blocks \['root', 'C'\]"):
        sch.get_block("D")
    i, j = sch.get_loops("C")[:2]
    with pytest.raises(S.ScheduleError) as info:
        sch.fuse(j, i)
    assert "in the IR:" in info.value.message and "for " in info.value.message


def test_fast_is_one_fixed_line_per_kind_of_refusal():
    sch = S.Schedule(scaled(), error_render="fast")
    messages = set()
    for name in ("D", "E"):
        with pytest.raises(BlockNotFoundError) as info:
            sch.get_block(name)
        messages.add(str(info.value))
    assert messages == {"[CVL-E103] get_block: Cannot find a block with the specified name "
                        "in the function."}
    i, j = sch.get_loops("Y")
    with pytest.raises(S.ScheduleError) as info:
        sch.fuse(j, i)
    assert info.value.message == f"fuse: {summary(type(info.value))}"
    assert "in the IR" not in info.value.message and info.value.primitive == "fuse"


def test_none_keeps_class_and_code_only():
    sch = S.Schedule(scaled(), error_render="none")
    assert_refused(sch, lambda: sch.compute_inline("nope"),
                   r"^\[CVL-E103\] compute_inline: \(not rendered\)$", BlockNotFoundError)
    assert sch.copy().error_render == "none"
    assert len(sch.trace) == 0


def test_render_level_leaves_accepted_primitives_alone():
    sch = S.Schedule(scaled(), error_render="none")
    i, j = sch.get_loops("Y")
    sch.fuse(i, j)
    assert len(sch.trace) == 2


def test_condense_detail_is_the_identity():
    err = S.errors.schedule_error(ScheduleArgumentError, "bind", "unknown thread axis")
    assert condense(err, "detail", "bind") is err
    assert err.message == "bind: unknown thread axis"


def test_error_unknown_render_level():
    with pytest.raises(ScheduleArgumentError, match=r"Schedule: error_render: expected one "
                       r"of 'detail', 'fast', 'none', got 'full'"):
        S.Schedule(scaled(), error_render="full")
