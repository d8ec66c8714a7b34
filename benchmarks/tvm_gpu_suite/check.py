"""One function through Cuvil's GPU path: build, nvcc, and the numbers.

The stages, each a bucket when it fails:

- ``build``: ``targets.build(f, Target("cuda", arch="sm_80"))`` (lowering, outlining,
  barriers, CUDA C; ``sm_90a`` alone when the kernel needs more shared memory than
  sm_80 has); a coded Cuvil error is ``build``, a plain Python error ``crash``.  A
  MetaSchedule sketch is completed first as MetaSchedule does (:mod:`.postproc`:
  its ``auto_tensorize`` blocks tensorized, its unbound blocks bound).  Refusals
  counted apart: more shared memory than sm_90 has is ``refused_as_tvm`` when one
  shared buffer alone needs it as the function's stores fill it (counted by
  :mod:`.shared_need`: MetaSchedule's ``VerifyGPUCode`` rejects such a candidate),
  else ``too_big`` (as Cuvil sizes the tiles); ``invalid``, an out-of-bounds access
  that the function's serial meaning, built with bounds checks, makes too (TVM does
  not check bounds: a right refusal);
- ``compile``: ``nvcc -ptx`` of the CUDA C for ``sm_80`` and ``sm_90a``, warnings as
  errors;
- ``compute``: the reference is the scheduled function itself with TensorIR's serial
  semantics (thread-bound loops made serial loops: what the schedule means), built for
  ``llvm`` with bounds checks; checked is the lowered CUDA module run by the
  interpreter with GPU semantics (every block, every thread, shared memory per block,
  barriers) and ``check_races=True``, or, when it executes more than
  :data:`INTERPRETER_WORK` stores, the same semantics compiled
  (:func:`~cuvil_tir.transform.gpu_emulate.emulate_gpu`: numbers, not races).  A
  race is ``race``, another error ``interp``, different numbers ``wrong``.

Inputs are random: floats are small integers (in ``[-3, 3]``: a sum or product of
them is exact in any order, so a reduction reordered across threads must give the very
same number and any difference is a defect, not rounding), except in a function with
an integer array (argmax's index: ties would let a reordered reduction pick another
index as rightly), where they are normal; integers are in ``[0, 4)``.  Symbolic sizes
are 16, and every argument array is compared after the run (exactly for integers,
within a tolerance for floats: exp, division and square roots still round).

Example::

    >>> import cuvil_tir as T
    >>> f = T.parse('''
    ... @T.prim_func
    ... def add(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    ...     for i in T.thread_binding(64, thread="threadIdx.x"):
    ...         with T.block("B"):
    ...             vi = T.axis.spatial(64, i)
    ...             B[vi] = A[vi] + T.float32(1)
    ... ''')
    >>> check(f, archs=())["bucket"]
    'passed'
"""

from __future__ import annotations

import re
import time

import numpy as np

import cuvil_tir as T
from cuvil_tir.arith import simplify
from cuvil_tir.buffer import Buffer
from cuvil_tir.errors import BoundsCheckError, CuvilError, LoweringError, RaceError
from cuvil_tir.expr import Call, IntImm, Var
from cuvil_tir.ops.gpu import collective
from cuvil_tir.stmt import BufferStore, For, Stmt
from cuvil_tir.transform.gpu_emulate import emulate_gpu
from cuvil_tir.transform.serial_threads import serial_threads
from cuvil_tir.visitor import post_order_visit, used_vars

from .postproc import rewrite_tensorize, rewrite_unbound_blocks
from .redundant import once_per_thread
from .shared_need import shared_lower_bound

#: the architectures every kernel must compile for without a warning
ARCHS = ("sm_80", "sm_90a")
#: the architecture with the most shared memory per block (227 KB)
BIGGEST = "sm_90a"
_SHARED_CAPACITY = re.compile(r"needs \d+ bytes of shared memory; \w+ offers")
#: the value of every symbolic size
SIZE = 16
#: the most stores a lowered function may execute for the interpreter to run it (and
#: check races); beyond, its GPU semantics run compiled (numbers only)
INTERPRETER_WORK = 1_500_000


def serial(func):
    """``func`` with its thread-bound loops as serial loops: what a scheduled function
    means in TensorIR (the interpreter would run bound loops with GPU semantics)."""
    return serial_threads(func)


def _reason(err: BaseException) -> str:
    text = f"{type(err).__name__}: {err}".strip()
    return text.splitlines()[0][:300]


def arguments(func, seed: int = 0) -> list:
    """Random arrays (and scalars) for ``func``'s parameters."""
    rng = np.random.default_rng(seed)
    env = {}
    for p in func.params:
        if isinstance(p, Buffer):
            for v in used_vars(p.shape):
                env.setdefault(id(v), SIZE)
    out = []
    ties = any(isinstance(p, Buffer) and not p.dtype.startswith(("float", "bfloat"))
               for p in func.params)
    for p in func.params:
        if isinstance(p, Var):
            out.append(env.get(id(p), SIZE))
            continue
        shape = tuple(_value(d, env, func) for d in p.shape)
        if p.dtype.startswith(("float", "bfloat")):
            data = rng.standard_normal(shape) if ties else rng.integers(-3, 4, shape)
            out.append(data.astype(np.float32 if p.dtype == "bfloat16" else p.dtype))
        elif p.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, 4, shape).astype(p.dtype))
    return out


def _value(expr, env, func) -> int:
    if isinstance(expr, int):
        return expr
    sub = {v: T.const(env.get(id(v), SIZE), v.dtype) for v in used_vars(expr)}
    return int(simplify(T.substitute(expr, sub)).value)


def work(node) -> int:
    """How many stores running ``node`` executes (loop extents multiplied; a symbolic
    extent counts as :data:`SIZE`): what decides whether the interpreter can run it."""
    count = [0]

    def walk(n, mult):
        if isinstance(n, For):
            ext = n.extent.value if isinstance(n.extent, IntImm) else SIZE
            walk(n.body, mult * ext)
        elif isinstance(n, BufferStore):
            count[0] += mult
        elif isinstance(n, (list, tuple)):
            for c in n:
                walk(c, mult)
        elif hasattr(n, "__dataclass_fields__"):
            for name in n.__dataclass_fields__:
                child = getattr(n, name)
                if isinstance(child, (Stmt, list, tuple)):
                    walk(child, mult)
    for f in (node.functions if hasattr(node, "functions") else [node]):
        walk(f.body, 1)
    return count[0]


def reference(func, arrays) -> None:
    """The scheduled function's meaning on ``arrays``: its thread-bound loops serial,
    built for ``llvm`` with bounds checks (the interpreter when that build refuses and
    the function is small enough for it: :data:`INTERPRETER_WORK`).
    A function that already holds ops run by a warp or block together (TVM's lowered
    ``tvm_thread_allreduce``) has no serial meaning: its meaning is the interpreter's
    GPU semantics of the function as written (before any of Cuvil's CUDA passes)."""
    import targets
    if _collective(func):
        T.interpret(func, *arrays)
        return
    # a copy that every thread repeats identically runs once (:mod:`.redundant`)
    plain = serial(once_per_thread(func))
    try:
        mod = targets.build(plain, targets.Target("llvm", bounds_check=True))
    except CuvilError:
        if work(plain) > INTERPRETER_WORK:
            # the interpreter would take hours: no meaning to compare with
            raise
        T.interpret(plain, *arrays)
        return
    mod(*arrays)


def _collective(func) -> bool:
    hit = []
    post_order_visit(func.body, lambda n: hit.append(n) if isinstance(n, Call)
                     and collective(n) is not None else None)
    return bool(hit)


def run_emulated(lowered, arrays) -> None:
    """The lowered CUDA module on ``arrays`` with GPU semantics, compiled
    (:func:`cuvil_tir.transform.gpu_emulate.emulate_gpu`, built for ``llvm`` with
    bounds checks)."""
    import targets
    emu = emulate_gpu(lowered)
    mod = targets.build(emu, targets.Target("llvm", bounds_check=True))
    shaped = []
    for p, a in zip(emu.params, arrays):
        if isinstance(a, np.ndarray) and isinstance(p, Buffer) and len(p.shape) != a.ndim:
            a = a.reshape(-1) if len(p.shape) == 1 else a
        shaped.append(a)
    mod(*shaped)


def check(func, archs=ARCHS, seed: int = 0, complete: bool = False) -> dict:
    """``{"bucket", "reason", "seconds"}`` of one parsed function; ``complete``: a
    MetaSchedule sketch, completed first as MetaSchedule does (:mod:`.postproc`)."""
    import targets
    from targets.cuda.nvcc import nvcc_ptx

    start = time.time()

    how = ""

    def done(bucket, reason=""):
        return {"bucket": bucket, "reason": reason, "checked": how,
                "seconds": round(time.time() - start, 2)}

    try:
        # the completed sketch is built; its meaning (the reference) is the sketch's
        built = rewrite_unbound_blocks(rewrite_tensorize(func)) if complete else func
        try:
            mod = targets.build(built, targets.Target("cuda", arch="sm_80"))
        except LoweringError as err:
            if not _SHARED_CAPACITY.search(str(err)):
                raise
            # more shared memory than sm_80 has: the largest (sm_90's) may hold it
            mod = targets.build(built, targets.Target("cuda", arch=BIGGEST))
            archs = tuple(a for a in archs if a == BIGGEST)
        source = mod.get_source("cuda")
    except CuvilError as err:
        return done(*_refused(func, err))
    except Exception as err:  # noqa: BLE001 - a plain error inside Cuvil is a crash
        return done("crash", _reason(err))
    for arch in archs:
        try:
            nvcc_ptx(source, arch)
        except CuvilError as err:
            return done("compile", f"{arch}: {_reason(err)}")
    args = arguments(func, seed)
    expected = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    actual = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    try:
        reference(func, expected)
    except Exception as err:  # noqa: BLE001 - the reference itself failed
        # the function as written reads or writes outside its buffers: it has no
        # meaning to compare with (TVM does not check), whatever the GPU build made of it
        return done("invalid" if "out-of-bounds" in str(err) else "reference", _reason(err))
    small = work(mod.lowered) <= INTERPRETER_WORK
    how = "interpreter" if small else "emulated"
    try:
        if small:
            T.interpret(mod.lowered, *actual, check_races=True)
        else:
            run_emulated(mod.lowered, actual)
    except RaceError as err:
        return done("race", _reason(err))
    except CuvilError as err:
        return done("interp", f"{how}: {_reason(err)}")
    except Exception as err:  # noqa: BLE001
        return done("crash", _reason(err))
    tol = _tolerance(func)
    for p, e, a in zip(func.params, expected, actual):
        if not isinstance(e, np.ndarray):
            continue
        if e.dtype.kind in "iub":
            bad = int(np.sum(e != a))
        else:
            bad = int(np.sum(~np.isclose(e, a, rtol=tol, atol=tol, equal_nan=True)))
        if bad:
            worst = float(np.nanmax(np.abs(e.astype("float64") - a))) if e.size else 0.0
            return done("wrong", f"{p.name}: {bad} of {e.size} elements differ (largest "
                                 f"difference {worst:.3g})")
    return done("passed")


def _refused(func, err) -> tuple:
    """``(bucket, reason)`` of a build refusal: ``refused_as_tvm`` when one shared
    buffer alone, as the function's stores fill it in one thread block, holds more than
    sm_90's shared memory (:mod:`.shared_need`: TVM's ``VerifyGPUCode`` refuses such
    a function too), ``too_big`` (more shared memory than any GPU has as Cuvil sizes
    the tiles), ``invalid`` (the function as written accesses outside its buffers: its
    serial meaning, built with bounds checks, fails the same way), or ``build``."""
    reason = _reason(err)
    if _SHARED_CAPACITY.search(str(err)):
        from targets.cuda import shared_capacity
        cap = shared_capacity(BIGGEST)
        need = shared_lower_bound(func, cap)
        if need is not None and need > cap:
            return "refused_as_tvm", (f"one shared buffer needs at least {need} bytes per "
                                      f"thread block as written ({BIGGEST} offers {cap}; "
                                      f"TVM's VerifyGPUCode refuses it too): {reason}")
        return "too_big", reason
    if "out-of-bounds" in str(err):
        args = arguments(func)
        try:
            reference(func, args)
        except (BoundsCheckError, LoweringError) as ref_err:
            if "out-of-bounds" in str(ref_err):
                return "invalid", reason
    return "build", reason


def _tolerance(func) -> float:
    """Relative and absolute tolerance: a thread split reorders a reduction, which
    rounds differently in float32 (1e-3) and much more in 16-bit floats (5e-2)."""
    low = []
    post_order_visit(func.body, lambda n: low.append(1) if isinstance(n, Buffer) and
                     n.dtype in ("float16", "bfloat16") else None)
    if low or any(isinstance(p, Buffer) and p.dtype in ("float16", "bfloat16")
                  for p in func.params):
        return 5e-2
    return 1e-3


__all__ = ["check", "arguments", "ARCHS", "SIZE"]
