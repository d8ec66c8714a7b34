"""``tvm.tir.schedule.analysis``: Cuvil's schedule analyses under TVM's names."""

from __future__ import annotations

import schedules as S

from ..._gap import module_getattr


def suggest_index_map(buffer, indices, loops, predicate=True):
    from .. import IndexMap
    found = S.suggest_index_map(buffer, list(indices), list(loops), predicate)
    return None if found is None else IndexMap(found)


def is_output_block(sch, block):
    return S.is_output_block(sch.func, block)


__getattr__ = module_getattr("tvm.tir.schedule.analysis")
