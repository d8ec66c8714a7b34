"""Structural comparison as TVM's tests use it, with a numeric verdict on a mismatch.

When Cuvil's result and TVM's expected function differ structurally, both run on the
same random inputs (the reference interpreter; a compiled ``llvm`` build for large
functions).  The :class:`StructuralMismatch` raised carries the verdict: ``numeq``
(same numbers: a different but equivalent schedule), ``wrong`` (different numbers),
or ``unchecked`` (the two cannot be run side by side, with the reason).
"""

from __future__ import annotations

import dataclasses
import os
import signal
import tempfile
import time

import numpy as np

import cuvil_tir as T
from cuvil_tir import IRModule, PrimFunc
from cuvil_tir import dtype as D
from cuvil_tir.arith import simplify
from cuvil_tir.buffer import Buffer
from cuvil_tir.expr import IntImm, Var
from cuvil_tir.node import Node, field_names
from cuvil_tir.visitor import Mutator, used_vars

#: a symbolic size takes this value in the numeric check
SIZE_VALUE = 16
#: functions with more buffer elements than this run compiled (llvm) first
COMPILE_ABOVE = 4096
#: seconds one interpreted run may take
INTERPRET_SECONDS = 20
RTOL, ATOL = 1e-4, 1e-5
#: attributes TVM's printer adds that say nothing about the computation
_NOISE_ATTRS = ("global_symbol", "tir.noalias", "calling_conv")


#: ids of the functions ``Schedule.mod`` handed out (Cuvil's results), so that a
#: mismatch reports Cuvil's side first whatever the test's argument order
SCHEDULED: set = set()


def scheduled(func):
    """Note ``func`` as a Cuvil result (kept alive with it: ids are not reused)."""
    SCHEDULED.add(id(func))
    _KEEP.append(func)
    return func


_KEEP: list = []


class StructuralMismatch(AssertionError):
    """Cuvil's IR differs from TVM's expected IR; ``verdict`` says how much."""

    def __init__(self, message: str, verdict: str, detail: str = ""):
        super().__init__(f"[{verdict}] {detail}\n{message}")
        self.verdict = verdict
        self.detail = detail


def as_func(x):
    """A PrimFunc of a function or a one-function module (``main`` of a larger one)."""
    from .script.tir import Unparsed
    if isinstance(x, Unparsed):
        x._fail()
    if isinstance(x, IRModule):
        x = x.functions[0] if len(x.functions) == 1 else x["main"]
    return x


class _Unnamed(Mutator):
    # TVM's structural equality ignores block names (SEqHashIgnore on name_hint)
    def visit_Block(self, b):
        b = self.generic_visit(b)
        return dataclasses.replace(b, name="") if b.name else b


def normalise(f):
    """``f`` as TVM's structural equality sees it: without its name, printer-only
    attributes and block names."""
    if not isinstance(f, PrimFunc):
        return f
    attrs = tuple((k, v) for k, v in f.attrs if k not in _NOISE_ATTRS)
    return PrimFunc(f.params, _Unnamed().visit(f.body), attrs)


def assert_equal(actual, expected) -> None:
    """TVM's ``assert_structural_equal`` with a numeric verdict on a mismatch."""
    a, e = as_func(actual), as_func(expected)
    if T.structural_equal(normalise(a), normalise(e)):
        return
    if not (isinstance(a, PrimFunc) and isinstance(e, PrimFunc)):
        raise StructuralMismatch(f"{a}\n---\n{e}", "unchecked", "not two functions")
    if id(e) in SCHEDULED and id(a) not in SCHEDULED:
        a, e = e, a
    verdict, detail = numeric_verdict(a, e)
    where = first_difference(normalise(a), normalise(e))
    raise StructuralMismatch(f"--- Cuvil\n{a}\n--- TVM\n{e}", verdict,
                             f"{detail}; first difference (Cuvil vs TVM): {where}")


def first_difference(a, b, path: str = "") -> str:
    """Where ``a`` and ``b`` first differ: the innermost differing field and both sides
    (free variables of sub-terms are matched afresh, so this is a guide, not a proof)."""
    if type(a) is not type(b):
        return f"{path or 'top'}: {_brief(a)} vs {_brief(b)}"
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items ({_brief(a)} vs {_brief(b)})"
        for k, (x, y) in enumerate(zip(a, b)):
            if not T.structural_equal(x, y):
                return first_difference(x, y, f"{path}[{k}]")
    elif isinstance(a, Node) and not isinstance(a, (Var, Buffer)):
        for name in field_names(type(a)):
            x, y = getattr(a, name), getattr(b, name)
            if not T.structural_equal(x, y):
                return first_difference(x, y, f"{path}.{name}")
    return f"{path or 'top'}: {_brief(a)} vs {_brief(b)}"


def _brief(x) -> str:
    text = " ".join(str(x).split())
    return text if len(text) <= 90 else text[:87] + "..."


def numeric_verdict(f: PrimFunc, g: PrimFunc, seed: int = 0) -> tuple[str, str]:
    """``("numeq"|"wrong"|"unchecked", detail)`` for two functions on random inputs."""
    try:
        args_f = _arguments(f, seed)
        args_g = _arguments(g, seed)
    except _Incomparable as err:
        return "unchecked", str(err)
    if len(args_f) != len(args_g) or any(
            _signature(a) != _signature(b) for a, b in zip(args_f, args_g)):
        return "unchecked", (f"signatures differ: {[_signature(a) for a in args_f]} vs "
                             f"{[_signature(b) for b in args_g]}")
    try:
        out_f = _run(f, args_f)
        out_g = _run(g, args_g)
    except _Incomparable as err:
        return "unchecked", str(err)
    for k, (x, y) in enumerate(zip(out_f, out_g)):
        if not isinstance(x, np.ndarray):
            continue
        if not _close(x, y):
            bad = int(np.sum(~_close_mask(x, y)))
            return "wrong", (f"parameter {k} ({f.params[k].name}): {bad} of {x.size} "
                             f"elements differ")
    return "numeq", "same results on random inputs"


class _Incomparable(Exception):
    pass


def _signature(a):
    return (a.shape, str(a.dtype)) if isinstance(a, np.ndarray) else type(a).__name__


def _arguments(f: PrimFunc, seed: int) -> list:
    rng = np.random.default_rng(seed)
    sizes: dict = {}
    for p in f.params:
        if isinstance(p, Var):
            sizes[p] = SIZE_VALUE
        elif isinstance(p, Buffer):
            for s in p.shape:
                for v in used_vars(s):
                    sizes.setdefault(v, SIZE_VALUE)
    args = []
    for p in f.params:
        if isinstance(p, Var):
            args.append(SIZE_VALUE)
            continue
        dims = []
        for s in p.shape:
            s = simplify(T.substitute(s, sizes)) if not isinstance(s, IntImm) else s
            if not isinstance(s, IntImm):
                raise _Incomparable(f"shape of {p.name} is not constant: {s}")
            dims.append(s.value)
        args.append(_random(rng, tuple(dims), p.dtype))
    return args


def _random(rng, dims, dt):
    if D.is_float(dt):
        return rng.uniform(-1, 1, dims).astype(D.to_numpy(dt))
    if D.is_bool(dt):
        return rng.integers(0, 2, dims).astype(bool)
    # small and non-negative: integer buffers are often indices (A[B[i], j])
    return rng.integers(0, 3, dims).astype(D.to_numpy(dt))


def _run(f, args) -> list:
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    if sum(a.size for a in args if isinstance(a, np.ndarray)) > COMPILE_ABOVE:
        out = _run_compiled(f, args)
        if out is not None:
            return out
    try:
        with _time_limit(INTERPRET_SECONDS):
            T.interpret(f, *args)
    except TimeoutError:
        raise _Incomparable(f"interpreting took over {INTERPRET_SECONDS} s") from None
    except Exception as err:
        raise _Incomparable(f"does not run: {type(err).__name__}: "
                            f"{str(err).splitlines()[0] if str(err) else ''}") from None
    return args


#: seconds a compiled run (build included) may take
COMPILED_SECONDS = 60


def _run_compiled(f, args):
    """Build ``f`` for llvm (bounds checked) and run it in a forked child, so that a
    crash of the build or of the compiled code fails this comparison, not the whole
    run; None when it did not build or run (the caller interprets instead)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.npz")
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                import targets
                try:
                    mod = targets.build(f, targets.Target("llvm", bounds_check=True))
                except Exception:
                    code = 2
                    raise
                mod(*args)
                np.savez(path, *[a for a in args if isinstance(a, np.ndarray)])
                code = 0
            finally:
                os._exit(code)
        deadline = time.time() + COMPILED_SECONDS
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.time() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return None
            time.sleep(0.01)
        if os.WIFSIGNALED(status):
            raise _Incomparable(f"the compiled function crashed the process (signal "
                                f"{os.WTERMSIG(status)}): a Cuvil build/codegen defect")
        if os.WEXITSTATUS(status) != 0 or not os.path.exists(path):
            return None
        with np.load(path) as data:
            arrays = [data[k] for k in data.files]
    it = iter(arrays)
    return [next(it) if isinstance(a, np.ndarray) else a for a in args]


class _time_limit:
    def __init__(self, seconds):
        self.seconds = seconds

    def _raise(self, *args):
        raise TimeoutError()

    def __enter__(self):
        self.old = signal.signal(signal.SIGALRM, self._raise)
        signal.alarm(self.seconds)

    def __exit__(self, *exc):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self.old)
        return False


def _close_mask(x, y):
    if x.dtype.kind == "f":
        return np.isclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True)
    return x == y


def _close(x, y) -> bool:
    return bool(np.all(_close_mask(x, y)))
