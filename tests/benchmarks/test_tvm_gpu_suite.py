"""The TVM GPU-suite runner on a tiny TVM-style test file written here: a function
that computes right, one TVM's test expects refused, a pass output, an unreadable one,
a factory's functions and one never reached, one reading outside its buffers, one
whose stores fill more shared memory than any GPU has (refused as TVM refuses it) and
one whose sparse stores Cuvil's tile box makes too big (counted apart); MetaSchedule's
tensor-core sketches completed (auto_tensorize); TVM's lowered all-reduce checked
against its own GPU semantics; the command line on a checkout."""

import textwrap

import pytest

from benchmarks.tvm_gpu_suite.__main__ import main
from benchmarks.tvm_gpu_suite.cases import definitions
from benchmarks.tvm_gpu_suite.check import check
from benchmarks.tvm_gpu_suite.report import render
from benchmarks.tvm_gpu_suite.runner import run

SYNTHETIC = textwrap.dedent('''
    import pytest
    import tvm
    from tvm.script import tir as T


    def _check_fail(f):
        with pytest.raises(ValueError):
            tvm.tir.transform.LowerCrossThreadReduction()(tvm.IRModule.from_expr(f))


    @T.prim_func
    def add(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for bx in T.thread_binding(2, thread="blockIdx.x"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("B"):
                    v = T.axis.spatial(64, bx * 32 + tx)
                    B[v] = A[v] + T.float32(1)


    @T.prim_func
    def lowered_add(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            B[tx] = A[tx] + T.float32(1)


    @T.prim_func
    def too_many_threads(A: T.Buffer((4096,), "float32")):
        for tx in T.thread_binding(4096, thread="threadIdx.x"):
            with T.block("A"):
                v = T.axis.spatial(4096, tx)
                A[v] = T.float32(0)


    @T.prim_func
    def unreadable(A: T.Buffer((4,), "float32")):
        for tx in T.thread_binding(4, thread="threadIdx.x"):
            T.no_such_builtin(A)


    @T.prim_func
    def out_of_bounds(A: T.Buffer((16,), "float32"), C: T.Buffer((16, 1), "float32")):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            for i in range(2):
                with T.block():
                    C[tx, i] = A[tx]


    @T.prim_func
    def over_shared(A: T.Buffer((65536,), "float32"), B: T.Buffer((65536,), "float32")):
        S = T.alloc_buffer((65536,), scope="shared")
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(1024, thread="threadIdx.x"):
                for i in range(64):
                    with T.block("S"):
                        v = T.axis.spatial(65536, i * 1024 + tx)
                        S[v] = A[v]
                for i in range(64):
                    with T.block("B"):
                        v = T.axis.spatial(65536, i * 1024 + tx)
                        B[v] = S[65535 - v]


    @T.prim_func
    def sparse_shared(A: T.Buffer((65536,), "float32"), B: T.Buffer((1024,), "float32")):
        S = T.alloc_buffer((65536,), scope="shared")
        for bx in T.thread_binding(1, thread="blockIdx.x"):
            for tx in T.thread_binding(1024, thread="threadIdx.x"):
                with T.block("S"):
                    v = T.axis.spatial(1024, tx)
                    S[v * 64] = A[v * 64]
                with T.block("B"):
                    v = T.axis.spatial(1024, tx)
                    B[v] = S[(1023 - v) * 64]


    def gen(n):
        @T.prim_func
        def scaled(A: T.Buffer((n,), "float32")):
            for tx in T.thread_binding(n, thread="threadIdx.x"):
                with T.block("A"):
                    v = T.axis.spatial(n, tx)
                    A[v] = A[v] * T.float32(2)
        return scaled


    def test_refused():
        _check_fail(too_many_threads)


    def test_never_reached():
        raise RuntimeError("TVM's API is not there")

        @T.prim_func
        def late(A: T.Buffer((4,), "float32")):
            for tx in T.thread_binding(4, thread="threadIdx.x"):
                A[tx] = T.float32(1)


    gen(8)
    gen(16)
''')


def test_definitions_and_roles():
    roles = {d.key: d.role for d in definitions(SYNTHETIC)}
    assert roles == {"add": "input", "lowered_add": "output",
                     "too_many_threads": "error", "unreadable": "input",
                     "out_of_bounds": "input", "over_shared": "input",
                     "sparse_shared": "input", "gen/scaled": "input", "test_never_reached/late": "input"}


def test_runner_buckets_each_case(tmp_path):
    summary = run({"test_synthetic_gpu.py": SYNTHETIC}, jobs=1, archs=(),
                  keep=str(tmp_path / "work"))
    got = {c["case"]: c["bucket"] for c in summary["cases"]}
    assert got == {"add": "passed", "too_many_threads": "refused_as_tvm",
                   "unreadable": "parse", "out_of_bounds": "invalid",
                   "over_shared": "refused_as_tvm", "sparse_shared": "too_big",
                   "gen/scaled[8]": "passed", "gen/scaled[16]": "passed",
                   "test_never_reached/late": "not_reached"}
    total = summary["total"]
    assert (total["cases"], total["passed_all"], total["outputs"]) == (9, 6, 1)
    text = render(summary)
    assert "Pass rate: 6 of 9 scheduled GPU functions (66.7%)" in text
    assert "(not counted as passing): 1; the pass rate without them: 75.0%" in text
    assert "Computing right: 3 of 7 functions TVM accepts." in text
    # over_shared fills 64K floats of one shared buffer per block (TVM refuses it too);
    # sparse_shared stores 1024, Cuvil's box holds 64K
    reasons = {c["case"]: c["reason"] for c in summary["cases"]}
    assert reasons["over_shared"].startswith("one shared buffer needs at least 262144 "
                                             "bytes per thread block as written (sm_90a "
                                             "offers 232448; TVM's VerifyGPUCode refuses "
                                             "it too)")
    assert "## WRONG cases (0)" in text


def test_check_finds_wrong_numbers(monkeypatch):
    # the reference made to disagree: the run reports WRONG with the first array named
    import benchmarks.tvm_gpu_suite.check as chk
    import cuvil_tir as T

    f = T.parse(textwrap.dedent(SYNTHETIC.split("@T.prim_func\n")[1].split(
        "\n\n\n")[0].replace("def add", "@T.prim_func\ndef add")))
    real = chk.reference

    def off_by_one(func, arrays):
        real(func, arrays)
        arrays[1][0] += 1
    monkeypatch.setattr(chk, "reference", off_by_one)
    res = check(f, archs=())
    assert res["bucket"] == "wrong"
    assert res["reason"].startswith("B: 1 of 64 elements differ")


@pytest.mark.parametrize("error, bucket", [
    ("out-of-bounds store to buffer B: index [0, 1, 0] is outside its shape (16, 1, 1)",
     "invalid"),
    ("the interpreter gave up", "reference")])
def test_a_reference_outside_its_buffers_is_invalid(monkeypatch, error, bucket):
    # TVM's nested_pipeline_prefetch_inner stores B[tx, i, 0] into a (16, 1, 1) tile:
    # the GPU build compacts the tile and runs, but the function as written has no
    # meaning to compare with
    import benchmarks.tvm_gpu_suite.check as chk
    import cuvil_tir as T

    f = T.parse(textwrap.dedent(SYNTHETIC.split("@T.prim_func\n")[1].split(
        "\n\n\n")[0].replace("def add", "@T.prim_func\ndef add")))

    def refuses(func, arrays):
        raise T.LoweringError(error)
    monkeypatch.setattr(chk, "reference", refuses)
    res = check(f, archs=())
    assert (res["bucket"], res["reason"]) == (bucket, f"LoweringError: [CVL-E104] {error}")


def test_command_line_needs_a_checkout(monkeypatch, capsys):
    monkeypatch.delenv("CUVIL_TVM", raising=False)
    with pytest.raises(SystemExit):
        main(["--quick"])
    assert "pass --tvm PATH or set CUVIL_TVM" in capsys.readouterr().err
    assert main(["--tvm", "/nonexistent", "--quick"]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_command_line_on_a_checkout(tmp_path, capsys):
    suite = tmp_path / "tvm" / "tests" / "python" / "tir-transform"
    suite.mkdir(parents=True)
    # only the first function: a short run
    (suite / "test_tir_transform_thread_sync.py").write_text(SYNTHETIC.split(
        "\n\n\n@T.prim_func\ndef lowered_add")[0])
    out = tmp_path / "summary.json"
    assert main(["--tvm", str(tmp_path / "tvm"), "--quick", "--archs",
                 "--json", str(out)]) == 0
    assert "Pass rate: 1 of 1" in capsys.readouterr().out
    assert out.read_text().startswith("{")


def test_a_tensor_core_sketch_is_tensorized_as_metaschedule_does():
    import cuvil_tir as T
    from benchmarks.tvm_gpu_suite.postproc import rewrite_tensorize
    from tests.targets.test_cuda_tvm_wmma import SKETCH

    done = T.to_text(rewrite_tensorize(T.parse(SKETCH)))
    for op in ("cuda.wmma_load", "cuda.wmma_fill", "cuda.wmma_mma", "cuda.wmma_store"):
        assert f'"{op}"' in done
    assert check(T.parse(SKETCH), archs=("sm_80",), complete=True)["bucket"] == "passed"


def test_a_lowered_allreduce_is_checked_against_its_own_gpu_semantics():
    import cuvil_tir as T
    from tests.cuvil_tir.test_tvm_allreduce import SUM

    assert check(T.parse(SUM), archs=())["bucket"] == "passed"


def test_the_shared_bound_gives_up_on_what_it_cannot_evaluate():
    import cuvil_tir as T
    from benchmarks.tvm_gpu_suite.shared_need import shared_lower_bound

    f = T.parse(textwrap.dedent('''
        @T.prim_func
        def f(A: T.Buffer((64,), "float32"), I: T.Buffer((64,), "int32")):
            S = T.alloc_buffer((64,), scope="shared")
            for tx in T.thread_binding(64, thread="threadIdx.x"):
                with T.block("S"):
                    v = T.axis.spatial(64, tx)
                    S[I[v]] = A[v]
                with T.block("A"):
                    v = T.axis.spatial(64, tx)
                    A[v] = S[v]
        '''))
    assert shared_lower_bound(f) is None
    g = T.parse(T.to_text(f).replace("S[I[v]]", "S[v]"))
    assert shared_lower_bound(g) == 256


def _spin(seconds_of_work):
    """A compiled loop (one C call) of a float chain: no Python signal stops it."""
    import cuvil_tir as T
    import targets

    n = int(seconds_of_work * 1e9) // (1 << 20) + 1
    f = T.parse(f'''
@T.prim_func
def spin(A: T.Buffer((1,), "float32")):
    for i, j in T.grid({n}, 1048576):
        A[0] = A[0] * T.float32(0.5) + T.float32(1)
''')
    return targets.build(f, targets.Target("llvm"))


def test_a_case_past_its_time_limit_is_killed_and_reported():
    # a reference built for llvm runs in one C call: SIGALRM's handler would wait for
    # it (the async matmul sketch's reference ran for hours); the case is a process
    import time

    import numpy as np

    from benchmarks.tvm_gpu_suite.child import _timed

    mod = _spin(30)
    start = time.monotonic()
    res = _timed(lambda: mod(np.zeros(1, "float32")) or {"bucket": "passed"}, 1)
    assert res == {"bucket": "timeout", "reason": "ran past 1 s", "seconds": 1}
    assert time.monotonic() - start < 10
    assert _timed(lambda: {"bucket": "passed", "reason": ""}, 60)["bucket"] == "passed"
    crashed = _timed(lambda: 1 / 0, 60)
    assert crashed["bucket"] == "crash" and "ZeroDivisionError" in crashed["reason"]


REPEATED = '''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"),
      C: T.Buffer((4,), "float32")):
    S = T.alloc_buffer((64,), scope="shared")
    R = T.alloc_buffer((64,), scope="shared")
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for vx in T.thread_binding(2, thread="vthread.x"):
            for tx in T.thread_binding(4, thread="threadIdx.x"):
                for k in range(2):
                    for f in range(16):
                        with T.block("S"):
                            v = T.axis.spatial(64, bx * 32 + k * 16 + f)
                            S[v] = A[v]
                    for f in range(16):
                        with T.block("R"):
                            v = T.axis.spatial(64, bx * 32 + k * 16 + f)
                            R[v] = S[v] + T.float32(1)
                    for f in range(4):
                        with T.block("B"):
                            v = T.axis.spatial(64, bx * 32 + k * 16 + vx * 8 + tx * 2 + f % 2)
                            B[v] = R[v] * T.float32(2)
                    with T.block("C"):
                        vb = T.axis.spatial(2, bx)
                        vk = T.axis.reduce(2, k)
                        with T.init():
                            C[vb] = T.float32(0)
                        C[vb] = C[vb] + S[vb * 32 + vk * 16]
'''


def test_a_copy_every_thread_repeats_runs_once_in_the_reference():
    import numpy as np

    import cuvil_tir as T
    from benchmarks.tvm_gpu_suite.check import arguments, reference, serial
    from benchmarks.tvm_gpu_suite.redundant import once_per_thread

    f = T.parse(REPEATED)
    g = once_per_thread(f)
    text = T.to_text(g)
    # S: every thread repeats it; R reads S, which a store of the function writes; C
    # is a reduction (repeating it adds again); B's index uses the threads
    assert text.count("T.where(vx == 0 and tx == 0)") == 1
    assert text.index("T.where(vx == 0 and tx == 0)") < text.index('T.block("R")')
    assert T.to_text(once_per_thread(g)) == text
    want, got = arguments(f), arguments(f)
    T.interpret(serial(f), *want)
    reference(f, got)
    for w, o in zip(want, got):
        np.testing.assert_array_equal(w, o)


def test_the_reference_of_a_pipelined_function_has_no_pipeline():
    # TVM's async sketches annotate the K loop of shared tiles allocated outside it:
    # run serially, over global buffers, the annotations have nothing to overlap
    # (they made the llvm build of the reference refuse, and it fell back to the
    # interpreter: hours on the 1024^3 matmul sketch)
    import cuvil_tir as T
    import targets
    from benchmarks.tvm_gpu_suite.check import serial

    f = T.parse('''
@T.prim_func
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), scope="shared")
    for tx in T.thread_binding(8, thread="threadIdx.x"):
        for k in T.serial(8, annotations={"software_pipeline_stage": [0, 1],
                                          "software_pipeline_order": [0, 1],
                                          "software_pipeline_async_stages": [0]}):
            with T.block("S"):
                v = T.axis.spatial(64, k * 8 + tx)
                S[v] = A[v]
            with T.block("B"):
                v = T.axis.spatial(64, k * 8 + tx)
                B[v] = S[v] + T.float32(1)
''')
    plain = serial(f)
    assert "software_pipeline" not in T.to_text(plain)
    targets.build(plain, targets.Target("llvm", bounds_check=True))
