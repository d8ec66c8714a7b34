"""TVM's ``tir.manifest_shared_memory_local_stage`` copies in a software pipeline's
annotations (cuvil_tir/transform/local_stage.py): counted twice by TVM, once by
Cuvil; folded, the pipeline builds and computes right; annotations that do not add up
are refused."""

import numpy as np
import pytest

import cuvil_tir as T
import targets
from cuvil_tir.errors import LoweringError
from cuvil_tir.transform.local_stage import fold_local_stages

#: two copies TVM stages through registers (its statements: A into registers, A into
#: shared, B ..., then the step): 5 stages for 3 statements
STAGED = '''
@T.prim_func
def f(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4, 32), "float32"),
      C: T.Buffer((32,), "float32")):
    As = T.alloc_buffer((4, 32), scope="shared")
    Bs = T.alloc_buffer((4, 32), scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for k in T.serial(4, annotations={"software_pipeline_stage": STAGES,
                                          "software_pipeline_order": ORDER}):
            with T.block("As"):
                vk, vx = T.axis.remap("SS", [k, tx])
                T.block_attr({"tir.manifest_shared_memory_local_stage": 1})
                As[vk, vx] = A[vk, vx]
            with T.block("Bs"):
                vk, vx = T.axis.remap("SS", [k, tx])
                T.block_attr({"tir.manifest_shared_memory_local_stage": 1})
                Bs[vk, vx] = B[vk, vx]
            with T.block("C"):
                vx, vk = T.axis.remap("SR", [tx, k])
                with T.init():
                    C[vx] = T.float32(0)
                C[vx] = C[vx] + As[vk, 31 - vx] * Bs[vk, vx]
'''


def _func(stages, order):
    return T.parse(STAGED.replace("STAGES", str(stages)).replace("ORDER", str(order)))


def test_copies_staged_through_registers_count_once():
    f = _func([0, 0, 0, 0, 1], [0, 2, 1, 3, 4])
    loop = fold_local_stages(f).body.block.body.body
    ann = dict(loop.annotations)
    assert (ann["software_pipeline_stage"], ann["software_pipeline_order"]) == (
        (0, 0, 1), (0, 1, 2))
    mod = targets.build(f, targets.Target("cuda", arch="sm_80"))
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-3, 4, (4, 32)).astype("float32") for _ in range(2))
    c = np.zeros(32, "float32")
    T.interpret(mod.lowered, a, b, c, check_races=True)
    np.testing.assert_array_equal(c, (a[:, ::-1] * b).sum(axis=0))


def test_an_order_that_does_not_count_the_staged_copies_is_refused():
    f = _func([0, 0, 0, 0, 1], [0, 1, 2])
    with pytest.raises(LoweringError, match=r"software_pipeline_order gives 3 places "
                       r"for 5 statements \(copies marked "
                       r"tir.manifest_shared_memory_local_stage count twice\)"):
        fold_local_stages(f)


def test_annotations_counting_each_copy_once_are_left_as_they_are():
    f = _func([0, 0, 1], [0, 1, 2])
    assert fold_local_stages(f) is f
