"""``benchmarks/contract_numbers.py``: the figures it reads from the sources, and its
reading of the hot loop in assembly (the builds it times run in CI's quick mode)."""

from tests.workloads import load_script

C = load_script("benchmarks/contract_numbers.py")

ASM = """
gemm:
    movl $0, %eax
.LBB0_1:
    vbroadcastss (%rdi), %zmm3
.LBB0_2:
    vfmadd231ps (%rsi), %zmm3, %zmm0
    vfmadd231ps 64(%rsi), %zmm3, %zmm1
    addq $128, %rsi
    decl %ecx
    jne .LBB0_2
    vaddps %zmm0, %zmm1, %zmm2
.LBB0_3:
    vmovups %zmm2, (%rdx)
    jne .LBB0_3
    incl %eax
    jne .LBB0_1
    retq
"""


def test_the_hot_loop_is_the_innermost_loop_with_the_most_fmas():
    # .LBB0_1 encloses .LBB0_2 (so it is not innermost); .LBB0_3 has no FMA
    assert C.hot_loop(ASM) == {"instructions": 5, "fma": 2}
    assert C.hot_loop("f:\n    retq\n") == {"instructions": 0, "fma": 0}


def test_the_source_figures_of_this_tree():
    graph = C.import_graph(C.ROOT)
    assert graph["cycles"] == 0 and graph["deferred"] < graph["imports"]
    lines = C.lines(C.ROOT)
    assert set(lines) >= {"llvm", "c", "cstyle", "cuda", "accel", "runtime", "contract"}
    assert all(n > 0 for n in lines.values())
    # the test backend (tests/targets/test_new_backend.py) is named in its own file only
    assert C.backend_mentions(C.ROOT)["test backend"] == ["tests/targets/test_new_backend.py"]
