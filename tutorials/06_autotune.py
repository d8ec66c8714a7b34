"""Tutorial 06: let the tuner find the schedule — a GEMM and a conv2d, from their
unscheduled definitions.

Run:  python tutorials/06_autotune.py

Tutorial 04 wrote a fast GEMM schedule by hand, for one CPU.  Here nobody writes a
schedule: ``S.tune(func, space=None, ...)`` generates the space of schedules from the
function's blocks and what the target declares (for a CPU: vector lanes and registers,
caches, cores, and the registered tensor intrinsics it can build; for a GPU: thread
axes and shared memory), prunes the candidates that cannot be good there, lets a cost
model (trained on this task and on the nearest tasks already in the database) choose
what to measure, measures safely in child processes, and keeps every measurement in a
database.  The budget is tiny so that
the tutorial runs in CI in about a minute: a real run uses hundreds of trials (see
``benchmarks/tune.py`` and docs/autotuning.md).

What it shows:

1. the generated space: one sampled candidate and what the machine allows;
2. tuning with the live progress line (trials, best so far, failures, ETA);
3. the best-so-far curve in the terminal (and as a PNG when matplotlib is there);
4. ``S.apply_best(db, func, target)``: the winner, built and checked against numpy;
   ``res.best_python()``: the winner as Python that replays when pasted;
5. resuming: the same call again measures nothing twice;
6. a network: a task list tuned with one budget by the gradient task scheduler
   (``cuvil tune bert-base --trials 2000 --minutes 60`` does this for BERT-base).
"""

import os
import tempfile
import time

import numpy as np

import cuvil_tir as T
import schedules as S
import targets
from schedules.tune.command import history_of
from schedules.tune.database import workload_key
from schedules.tune.report import PlotUnavailableError, curve_text, plot_curve, \
    trials_to_fraction
from schedules.tune.rules import rule_for, space_for
from schedules.tune.scheduler import TaskScheduler
from schedules.tune.space import machine_of

TARGET = targets.Target("llvm")          # this machine: the space follows its CPU


def gemm(n):
    A = T.placeholder((n, n), name="A")
    B = T.placeholder((n, n), name="B")
    k = T.reduce_axis((0, n), name="k")
    C = T.compute((n, n), lambda i, j: T.sum(A[i, k] * B[k, j], axis=k), name="C")
    return T.create_prim_func([A, B, C])


def conv2d(c, kout, h, w):
    """3x3 convolution, stride 1, zero padding 1, NCHW with N = 1."""
    data = T.placeholder((c, h, w), name="data")
    weight = T.placeholder((kout, c, 3, 3), name="weight")
    pad = T.compute((c, h + 2, w + 2), lambda ci, y, x: T.if_then_else(
        (y >= 1) & (y <= h) & (x >= 1) & (x <= w), data[ci, y - 1, x - 1], T.const(0.0)),
        name="pad")
    rc, rh, rw = (T.reduce_axis((0, c), name="rc"), T.reduce_axis((0, 3), name="rh"),
                  T.reduce_axis((0, 3), name="rw"))
    out = T.compute((kout, h, w), lambda o, y, x: T.sum(
        pad[rc, y + rh, x + rw] * weight[o, rc, rh, rw], axis=[rc, rh, rw]), name="out")
    return T.create_prim_func([data, weight, out])


def numpy_conv(x, wt):
    c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))
    cols = cols.transpose(0, 3, 4, 1, 2).reshape(c * 9, h * w)          # im2col
    return (wt.reshape(wt.shape[0], c * 9) @ cols).reshape(wt.shape[0], h, w)


def median_time(fn, repeat=7):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def tune_and_check(db, name, func, args, reference, trials):
    print(f"== tuning {name}: {trials} trials (progress on stderr)")
    res = S.tune(func, space=None, target=TARGET, trials=trials, database=db,
                 timeout_s=60, seed=0, progress=True)
    print("   " + res.report().replace("\n", "\n   "))
    # the database holds every record of this function on this target, in order
    history = history_of(S.Database(db).records(workload_key(func, TARGET)))
    print(curve_text(history, width=40, height=8))
    print(f"   90% of the best speed reached at trial {trials_to_fraction(history, 0.9)}")
    try:
        print(f"   curve also written to {plot_curve(history, db + f'.{name}.png')}")
    except PlotUnavailableError as err:      # matplotlib is an optional extra
        print(f"   (no PNG: {err.message.split(';')[0]})")
    sch = S.apply_best(db, func, TARGET)     # the best record, replayed
    mod = targets.build(sch, TARGET)
    out = np.zeros_like(args[-1])
    mod(*args[:-1], out)
    want = reference()
    np.testing.assert_allclose(out, want, rtol=1e-3, atol=1e-3)
    ours = median_time(lambda: mod(*args[:-1], out))
    theirs = median_time(reference)
    print(f"   best schedule: {ours * 1e3:.3f} ms, numpy {theirs * 1e3:.3f} ms "
          f"(ratio {theirs / ours:.2f}x; result matches numpy)")
    return res, sch


def show_best_python(res, func):
    """The winner printed as Python, pasted back onto a fresh schedule: the same IR."""
    code = res.best_python()
    print("== the best GEMM schedule as Python (first lines):")
    for line in code.splitlines()[:6]:
        print("   " + line)
    sch = S.Schedule(func)
    exec(code, {"sch": sch, "S": S, "T": T})
    assert T.structural_equal(sch.func, res.best_schedule.func)
    print(f"   ... {len(code.splitlines())} lines; pasted onto S.Schedule(func) they "
          "give the same schedule")


if __name__ == "__main__":
    DB = os.path.join(tempfile.mkdtemp(prefix="cuvil-tune-"), "tune.jsonl")
    m = machine_of(TARGET)
    print(f"== the machine the space is sized for: {m.vector_bits}-bit vectors "
          f"({m.lanes('float32')} float32 lanes), {m.vector_registers} vector registers, "
          f"L1 {m.l1d_bytes >> 10} KiB, L2 {m.l2_bytes >> 10} KiB, {m.cores} cores")
    f = gemm(256)
    sch = S.Schedule(f, seed=3)
    space_for(f, TARGET)(sch)
    print(f"== one candidate of the generated GEMM space (rules: {rule_for(TARGET)!r}, "
          "from the target's declarations): its decisions")
    for k, d in sorted(sch.trace.decisions.items()):
        print(f"   instruction {k} ({sch.trace[k].name}): {d}")

    rng = np.random.default_rng(0)
    a = rng.standard_normal((256, 256)).astype("float32")
    b = rng.standard_normal((256, 256)).astype("float32")
    res, _ = tune_and_check(DB, "gemm256", f, [a, b, np.zeros((256, 256), "float32")],
                            lambda: a @ b, trials=6)
    show_best_python(res, f)

    x = rng.standard_normal((16, 28, 28)).astype("float32")
    w = rng.standard_normal((32, 16, 3, 3)).astype("float32")
    tune_and_check(DB, "conv3x3", conv2d(16, 32, 28, 28),
                   [x, w, np.zeros((32, 28, 28), "float32")], lambda: numpy_conv(x, w),
                   trials=5)

    print("== resume: the same call again finds every candidate in the database")
    lines = sum(1 for _ in open(DB))
    again = S.tune(f, space=None, target=TARGET, trials=1, database=DB, timeout_s=60,
                   seed=0, progress=False)
    print(f"   {lines} records before; this call measured {again.trials} new candidate "
          f"(none twice); best recorded {again.best_seconds * 1e3:.3f} ms")

    print("== a network: two tasks, one budget, the time going where it pays most")
    net = {"name": "tiny", "tasks": [
        {"name": "proj", "op": "matmul", "weight": 12, "args": {"m": 32, "n": 64, "k": 64}},
        {"name": "softmax", "op": "softmax", "weight": 12, "args": {"rows": 32, "cols": 64}}]}
    from schedules.tune.executor import local_executor
    with local_executor() as ex:
        ts = TaskScheduler(net, TARGET, DB + ".net", ex, round_trials=2, timeout_s=60)
        ts.run(6)
    print("   " + ts.report().replace("\n", "\n   "))
