"""What the region check after each schedule step costs: only the blocks a step made
are checked, and one block's check simplifies each distinct expression once."""

import collections

import cuvil_tir as T
import cuvil_tir.region_check as region_check
import schedules as S
from cuvil_tir.arith.affine import Key
from cuvil_tir.block_regions import BlockAnalyzer
from cuvil_tir.analysis import tree


def _two_blocks():
    A = T.placeholder((16, 16), name="A")
    B = T.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="B")
    k = T.reduce_axis((0, 16), name="k")
    C = T.compute((16, 16), lambda i, j: T.sum(B[i, k] * A[k, j], axis=k), name="C")
    return T.create_prim_func([A, C])


def _checked(monkeypatch, func, since=None) -> list:
    names = []
    check = region_check.check_block_regions

    def counting(block, outer=None):
        names.append(block.name)
        return check(block, outer)
    monkeypatch.setattr(region_check, "check_block_regions", counting)
    region_check.verify_block_regions(func, since=since)
    return names


def test_only_the_blocks_a_step_made_are_checked(monkeypatch):
    sch = S.Schedule(_two_blocks())
    old = sch.func
    assert _checked(monkeypatch, old) == ["root", "B", "C"]
    i, _, _ = sch.get_loops("C")
    sch.split(i, [4, 4])           # C's loops change, C's block and B do not
    assert _checked(monkeypatch, sch.func, since=old) == ["root"]
    old = sch.func
    sch.cache_read("C", 0, "local")  # a new copy block; C now reads the copy
    assert _checked(monkeypatch, sch.func, since=old) == ["root", "B_local", "C"]


def test_a_block_check_simplifies_each_distinct_expression_once(monkeypatch):
    sch = S.Schedule(_two_blocks())
    block = tree.get(sch.func, tree.find_block(sch.func, "C")).block
    seen = collections.Counter()
    simplify = BlockAnalyzer.simplify

    def counting(self, e, steps=2):
        seen[Key(e)] += 1
        return simplify(self, e, steps)
    monkeypatch.setattr(BlockAnalyzer, "simplify", counting)
    region_check.check_block_regions(block)
    # C reads and writes C[v_i, v_j]: its indices and ends repeat, each simplified once
    assert seen and max(seen.values()) == 1


def test_the_remembered_answers_are_dropped_when_the_knowledge_changes():
    ana, i = BlockAnalyzer(), T.var("i")
    ana.bind(i, T.Range.from_extent(4))
    assert ana.fixed_prove(i < 4)
    ana.bind(i, T.Range.from_extent(8))
    assert not ana.fixed_prove(i < 4)
