"""The tuned rows of ``benchmarks/cuda.py``: ``tune:float16:4096x4096x4096`` and
``tune:softmax:4096x4096``, each the tuner's best schedule from the generated GPU space
(``S.tune(func, None, target="cuda")``: ``schedules.tune.gpu_rules``, tensor cores,
vthreads and pipeline stages included) beside cuBLAS / cupy and beside the hand
schedule the other rows time (the fastest correct ``gemm_variants`` entry; the fused
softmax of ``targets.toolkit.cuda_norms``).

On a GPU: ``TRIALS`` candidates measured (``QUICK_TRIALS`` at 1024 with ``--quick``),
then the best one timed like every other row.  The untuned reference is computed once
per machine on the host (minutes for a naive 4096^3 GEMM, seconds at 1024), so a short
GPU session runs ``python benchmarks/cuda.py --quick --only ^tune --skip-tests``.  Without a GPU (CI's ``--quick``): the
space is drawn at the row's full size until ``COMPILED`` candidates pass the pruner,
each is built and the lot is compiled by nvcc for sm_80 and sm_90 in one call per
architecture: generated and compiled, not timed.

Example::

    >>> tuned_row_names()
    ['tune:float16:4096x4096x4096', 'tune:softmax:4096x4096']
"""

from __future__ import annotations

import schedules as S
import targets
from schedules.tune.rules import gpu_prune, space_for
from tests.workloads import softmax     # max, exp, sum, divide: four te blocks

#: candidates measured on a GPU (full size, and with --quick at most 1024 a side)
TRIALS = 32
QUICK_TRIALS = 8
#: a GPU tuning run stops proposing after this many seconds
TUNE_SECONDS = 900
#: seconds for the untuned reference (on the host, once per machine)
REFERENCE_S = 1200
#: candidates built and compiled without a GPU, and the most seeds drawn for them
COMPILED = 4
DRAWS = 24
#: the rows' time limit in their own process (tuning takes longer than a timing)
ROW_TIMEOUT = 1500.0


def tuned_row_names() -> list:
    """The tuned rows (module doc)."""
    return ["tune:float16:4096x4096x4096", "tune:softmax:4096x4096"]


def row_func(name: str, gemm_func, cap: int | None = None):
    """The te function of tuned row ``name`` (sizes capped at ``cap``)."""
    _, what, shape = name.split(":")
    dims = [min(int(x), cap or int(x)) for x in shape.split("x")]
    return gemm_func(*dims, what) if what != "softmax" else softmax(*dims).func


def quick_tuned_row(name: str, gemm_func) -> dict:
    """Without a GPU: candidates of the generated space built and compiled (module
    doc)."""
    from targets.cuda.codegen import combine
    from targets.cuda.nvcc import nvcc_available, nvcc_ptx
    func = row_func(name, gemm_func)
    space = space_for(func, "cuda")
    mods, labels = [], []
    for seed in range(DRAWS):
        sch = S.Schedule(func, seed=seed)
        space(sch)
        if gpu_prune(sch.func, "cuda") is not None:
            continue
        mods.append(targets.build(sch, "cuda", name=f"tuned{seed}"))
        labels.append(_first_choice(sch))
        if len(mods) == COMPILED:
            break
    if not mods:
        return {"row": name, "status": "failed",
                "detail": f"no candidate of {DRAWS} draws passed the pruner"}
    if nvcc_available():
        text = combine([m.runtime.program for m in mods])
        for arch in ("sm_80", "sm_90"):
            nvcc_ptx(text, arch)
    return {"row": name, "status": "ok",
            "detail": f"{len(mods)} candidates of the generated space built and compiled "
                      f"for sm_80 and sm_90 ({', '.join(labels)}); tuning needs a GPU"}


def _first_choice(sch) -> str:
    """The label a candidate drew at its first categorical (tile / tensor core)."""
    for inst in sch.trace.insts:
        if inst.name == "sample_categorical" and "tile" in inst.inputs[0]:
            return str(inst.inputs[0][inst.decision])
    return "tile"


def gpu_tuned_row(cp, name: str, quick: bool, gemm_func, timed, hand) -> dict:
    """On a GPU: tune, then time the best candidate beside cuBLAS/cupy and the hand
    schedule ``hand(func, target)`` (a built module, or None)."""
    func = row_func(name, gemm_func, 1024 if quick else None)
    what = name.split(":")[1]
    shape = tuple(int(s) for s in func.params[0].shape)
    target = targets.Target("cuda", arch=f"sm_{cp.cuda.Device().compute_capability}")
    res = {"row": name, "family": f"tune:{what}", "shape": shape}
    # the untuned reference is computed once on the host (cached per machine); it
    # gets 10 x timeout_s, and a naive 4096^3 GEMM takes minutes
    tuned = S.tune(func, None, target=target, trials=QUICK_TRIALS if quick else TRIALS,
                   progress=False, max_seconds=TUNE_SECONDS, timeout_s=REFERENCE_S / 10)
    res["report"] = tuned.report().splitlines()[0]
    res["tuned_trace"] = _first_choice(tuned.best_schedule)
    mod = targets.build(tuned.best_schedule, target, name="tuned")
    args, check, theirs = _inputs(cp, what, func)
    mod(*args)
    res["max_err"] = check()
    res["ours_s"] = timed(cp, lambda: mod(*args))
    res["baseline_s"] = timed(cp, theirs)
    res["baseline"] = "cupy.matmul fp16 (cuBLAS)" if what != "softmax" else "cupy composed"
    try:
        own = hand(func, target)
        if own is not None:
            res["hand_s"] = timed(cp, lambda: own(*args))
    except Exception as e:  # noqa: BLE001 - the hand schedule's failure is reported
        res["hand_error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    res["status"] = "ok" if res["max_err"] < 1e-2 else "WRONG"
    return res


def _inputs(cp, what, func):
    """``(arguments, the max relative error of the output, the baseline call)``."""
    rng = cp.random.default_rng(0)
    if what == "softmax":
        x = rng.standard_normal(tuple(int(s) for s in func.params[0].shape), dtype="float32")
        y = cp.zeros_like(x)

        def ref():
            e = cp.exp(x - x.max(axis=1, keepdims=True))
            return e / e.sum(axis=1, keepdims=True)
        return (x, y), lambda: float(cp.abs(y - ref()).max()), ref
    m, k = (int(s) for s in func.params[0].shape)
    n = int(func.params[1].shape[1])
    a = rng.standard_normal((m, k), dtype="float32").astype("float16")
    b = rng.standard_normal((k, n), dtype="float32").astype("float16")
    c = cp.zeros((m, n), "float32")
    want = cp.matmul(a.astype("float32"), b.astype("float32"))
    return ((a, b, c), lambda: float(cp.abs(c - want).max() / max(1.0, float(
        cp.abs(want).max()))), lambda: cp.matmul(a, b))


def show_tuned(res) -> str:
    """The printed line of a tuned row's GPU figures."""
    ours, theirs = res["ours_s"], res["baseline_s"]
    line = (f"{res['row']:36s} tuned {ours * 1e3:9.3f} ms | {res['baseline']} "
            f"{theirs * 1e3:9.3f} ms | ratio {theirs / ours:5.2f}")
    if res.get("hand_s"):
        line += f" | hand schedule {res['hand_s'] * 1e3:9.3f} ms, ratio " \
                f"{res['hand_s'] / ours:5.2f}"
    elif res.get("hand_error"):
        line += f" | hand schedule failed: {res['hand_error']}"
    return line + f" | err {res['max_err']:.1e} | {res['tuned_trace']}; {res['report']}"


__all__ = ["COMPILED", "ROW_TIMEOUT", "TRIALS", "gpu_tuned_row", "quick_tuned_row",
           "row_func", "show_tuned", "tuned_row_names"]
