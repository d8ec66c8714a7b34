"""``fold_local_stages``: TVM's ``tir.manifest_shared_memory_local_stage`` copies in a
software pipeline's statement count.

MetaSchedule's tensor-core rule marks a copy into shared memory with
``T.block_attr({"tir.manifest_shared_memory_local_stage": 1})``: TVM's
``ManifestSharedMemoryLocalStage`` pass makes it two statements (global memory into
registers, registers into shared memory), and the ``software_pipeline_stage`` /
``software_pipeline_order`` annotations of the loop around it count both (TVM's
``matmul_relu_pipeline`` sketch: 7 stages for two such copies and an inner pipeline of
3).  Cuvil copies in one statement: ``fold_local_stages`` drops the registers'
statement from the annotations and keeps the copy at the stage and place of its
store into shared memory.  The copy then reads global memory later in the step than
TVM's, which changes nothing the loop computes (the pipeline's dependence check
still applies); TVM's staging through registers is what is left out.

Example::

    >>> fold_annotations((0, 0, 0, 0, 1), (0, 3, 1, 4, 2), [2, 2, 1])
    ((0, 0, 1), (1, 2, 0))
"""

from __future__ import annotations

from ..errors import LoweringError
from ..function import PrimFunc
from ..printer import to_text
from ..stmt import BlockRealize, For, SeqStmt
from ..visitor import Mutator, post_order_visit
from .software_pipeline import ORDER, STAGE

#: TVM's annotation of a copy staged through registers
LOCAL_STAGE = "tir.manifest_shared_memory_local_stage"


def fold_annotations(stages: tuple, order, slots: list) -> tuple:
    """``(stages, order)`` for statements that each covered ``slots[i]`` of TVM's
    statements: a statement of 2 slots keeps its second (the store into shared
    memory); an inner pipeline's 3 slots (prologue, body, epilogue) are kept whole."""
    keep, at = [], 0
    for n in slots:
        keep.extend(range(at, at + n) if n != 2 else [at + 1])
        at += n
    new_stages = tuple(stages[k] for k in keep)
    if not order:
        return new_stages, order
    ranks = sorted(keep, key=lambda k: order[k])
    place = {k: p for p, k in enumerate(ranks)}
    return new_stages, tuple(place[k] for k in keep)


def _staged(stmt) -> bool:
    hit = []
    post_order_visit(stmt, lambda n: hit.append(1) if isinstance(n, BlockRealize) and
                     dict(n.block.annotations).get(LOCAL_STAGE) else None)
    return bool(hit)


def _slots(stmt) -> int:
    if isinstance(stmt, For) and STAGE in dict(stmt.annotations):
        return 3                    # an inner pipeline: its prologue, body, epilogue
    return 2 if _staged(stmt) else 1


class _Fold(Mutator):
    def __init__(self, func):
        self.func = func

    def visit_For(self, loop):
        loop = self.generic_visit(loop)
        ann = dict(loop.annotations)
        if STAGE not in ann:
            return loop
        body = loop.body
        stmts = body.seq if isinstance(body, SeqStmt) else (body,)
        slots = [_slots(s) for s in stmts]
        if 2 not in slots or len(ann[STAGE]) != sum(slots):
            return loop
        if ann.get(ORDER) and len(ann[ORDER]) != sum(slots):
            raise LoweringError(
                f"software pipeline on loop {loop.loop_var.name}: {ORDER} gives "
                f"{len(ann[ORDER])} places for {sum(slots)} statements (copies marked "
                f"{LOCAL_STAGE} count twice):\n" + to_text(self.func, highlight=loop))
        stages, order = fold_annotations(ann[STAGE], ann.get(ORDER), slots)
        ann[STAGE] = stages
        if order:
            ann[ORDER] = order
        return For(loop.loop_var, loop.min, loop.extent, loop.kind, loop.body,
                   loop.thread_tag, tuple(ann.items()))


def fold_local_stages(func: PrimFunc) -> PrimFunc:
    """``func`` with the pipeline annotations of loops holding copies marked
    ``tir.manifest_shared_memory_local_stage`` counted as Cuvil's statements (module
    docstring).  Runs on block-level IR.

    Example::

        >>> import cuvil_tir as T
        >>> f = T.PrimFunc([], T.Evaluate(T.const(0)))
        >>> fold_local_stages(f) is f
        True
    """
    body = _Fold(func).visit(func.body)
    return func if body is func.body else func.with_body(body)


__all__ = ["LOCAL_STAGE", "fold_annotations", "fold_local_stages"]
