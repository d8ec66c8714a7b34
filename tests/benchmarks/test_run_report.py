"""benchmarks/run.py tells the truth (issue 25): a comparison whose repeats spread widely
is flagged instead of given a ratio, a multi-thread peak that does not scale is marked,
numpy's BLAS kernel is named, and the BLAS overrides are dropped for the command."""

import os
import subprocess
import sys
import types

from tests.workloads import load_script


def _bench():
    return load_script("benchmarks/run.py")


def _stats(median, lo, hi):
    return {"median": median, "min": lo, "max": hi, "n": 5}


def _row(name, ours, theirs, threads=1):
    return {"name": name, "flops": 2e9, "threads": threads, "build_s": 0.1,
            "ours": ours, "numpy": theirs}


def test_a_wide_spread_is_flagged_not_given_a_ratio(capsys):
    run = _bench()
    peak = {"lanes": 16, "threads": 2, "1 thread": 100.0, "all threads": 195.0,
            "scaling": 1.95}
    steady = _row("gemm steady", _stats(0.02, 0.019, 0.021), _stats(0.04, 0.039, 0.041))
    wild = _row("gemm wild", _stats(0.02, 0.019, 0.021), _stats(0.09, 0.03, 0.5), 2)
    run.report([steady, wild], peak, 1e-6, "openblas")
    out = capsys.readouterr().out
    assert "gemm steady" in out and " 2.00 " in out
    line = next(ln for ln in out.splitlines() if ln.startswith("gemm wild"))
    assert " noisy " in line and "4.50" not in line
    assert "noisy: 1 comparison(s) whose repeats spread by more than 25% of their " \
           "median (gemm wild): no ratio is shown" in out
    assert not steady["noisy"] and wild["noisy"]


def test_a_multi_thread_peak_that_does_not_scale_is_marked(capsys):
    run = _bench()
    peak = {"lanes": 16, "threads": 2, "1 thread": 245.3, "all threads": 245.3,
            "scaling": 1.0}
    row = _row("gemm fp32 512^3 (2 threads)", _stats(0.001, 0.00099, 0.00101),
               _stats(0.02, 0.0199, 0.0201), threads=2)
    run.report([row], peak, 1e-6, "openblas")
    out = capsys.readouterr().out
    assert "245.3 GFLOP/s on 2 threads (1.00x)" in out
    assert "the 2-thread peak is only 1.00x the one-thread peak" in out
    assert "%?" in next(ln for ln in out.splitlines() if ln.startswith("gemm fp32"))


def test_the_peak_is_measured_on_the_pools_threads():
    from targets.llvm import threadpool
    peak = _bench().measure_peak(1, reps=20_000)
    assert peak["threads"] == threadpool.get_num_threads()
    assert peak["1 thread"] > 0 and peak["all threads"] > 0
    assert abs(peak["scaling"] - peak["all threads"] / peak["1 thread"]) < 1e-9


def test_the_blas_kernel_is_named(monkeypatch):
    fake = types.ModuleType("threadpoolctl")
    fake.threadpool_info = lambda: [
        {"user_api": "blas", "internal_api": "openblas", "version": "0.3.31",
         "architecture": "Zen", "num_threads": 2},
        {"user_api": "openmp", "internal_api": "openmp", "num_threads": 2}]
    monkeypatch.setitem(sys.modules, "threadpoolctl", fake)
    assert _bench().blas_info() == "openblas 0.3.31, kernel Zen, 2 threads"


def test_blas_overrides_are_dropped_for_the_benchmark_only(tmp_path, monkeypatch):
    env_mod = load_script("benchmarks/bench_env.py")
    script = tmp_path / "probe.py"
    script.write_text("import os, sys\n"
                      "print(os.environ.get('OPENBLAS_CORETYPE'), sys.argv[1:])\n"
                      "sys.exit(3)\n")
    env = {"PATH": "/usr/bin:/bin", "OPENBLAS_CORETYPE": "Haswell"}
    out = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "import bench_env; sys.exit(bench_env.rerun_without_blas_overrides("
         "sys.argv[2], ['--quick']))", os.path.dirname(env_mod.__file__), str(script)],
        env=env, capture_output=True, text=True)
    assert out.returncode == 3
    assert "None ['--quick']" in out.stdout
    assert "re-running with OPENBLAS_CORETYPE unset" in out.stdout
    assert env_mod.rerun_without_blas_overrides(str(script), [], env={"PATH": "/bin"}) \
        is None
