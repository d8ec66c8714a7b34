"""Running passes: ``PassContext`` (instruments, options) and ``PassManager``.

A pass is a pure function ``PrimFunc -> PrimFunc`` (applied to every function of a
module), or a module pass ``IRModule -> IRModule`` (its ``pass_kind`` attribute is
``"module"``; a PrimFunc reaching it becomes a one-function module first), or one
taking either (``pass_kind = "any"``, such as ``verify``).  Its name is its
``pass_name`` attribute or ``__name__``.  Instruments observe every pass run inside a context
(timing, IR dumps, verification).  The environment variables ``CUVIL_PASS_TIMING=1``
and ``CUVIL_DUMP_IR=<dir>`` (and ``CUVIL_DUMP_ON_FAIL=<dir>``) are read only when a
top-level context is entered (never inside passes), and add a timing table printed to
stderr after each lowering, a :class:`~cuvil_tir.transform.instruments.DumpIR`
instrument (and a :class:`~cuvil_tir.transform.instruments.DumpOnFail` one).

Example::

    >>> import cuvil_tir as T
    >>> from cuvil_tir.transform import PassManager, PassTiming
    >>> def rename(f): return f.with_attr("global_symbol", "g")
    >>> timing = PassTiming()
    >>> with PassContext(instruments=[timing]):
    ...     f = PassManager([rename])(T.create_prim_func([T.placeholder((2,), name="X")]))
    >>> f.name, timing.calls("rename")
    ('g', 1)
"""

from __future__ import annotations

import os
import threading

from ..errors import LoweringError
from ..function import PrimFunc
from ..ir_module import IRModule, as_module
from .instruments import DumpIR, DumpOnFail, PrintTimingAfterLowering

_STATE = threading.local()


def _stack() -> list:
    s = getattr(_STATE, "stack", None)
    if s is None:
        s = _STATE.stack = []
    return s


def pass_name(p) -> str:
    """The display name of a pass: ``pass_name`` attribute, ``__name__`` or its type.

    Example::

        >>> def my_pass(f): return f
        >>> pass_name(my_pass)
        'my_pass'
    """
    name = getattr(p, "pass_name", None) or getattr(p, "__name__", None)
    if name is None:
        inner = getattr(p, "func", None)     # functools.partial
        name = getattr(inner, "__name__", None) or type(p).__name__
    return str(name)


#: what a pass takes: ``"function"`` (the default), ``"module"`` or ``"any"``
PASS_KINDS = ("function", "module", "any")


def pass_kind(p) -> str:
    """What pass ``p`` takes (its ``pass_kind`` attribute; ``"function"`` by default).

    Example::

        >>> pass_kind(lambda f: f)
        'function'
    """
    kind = getattr(p, "pass_kind", "function")
    if kind not in PASS_KINDS:
        raise LoweringError(f"pass '{pass_name(p)}': pass_kind must be one of "
                            f"{', '.join(PASS_KINDS)}, found {kind!r}")
    return kind


def apply_pass(p, ir):
    """Run pass ``p`` on ``ir`` (a PrimFunc or an IRModule) as its kind says.

    Example::

        >>> import cuvil_tir as T
        >>> mod = T.IRModule.from_func(T.PrimFunc([], T.Evaluate(T.const(0))))
        >>> apply_pass(lambda f: f.with_attr("k", 1), mod).entry.attr("k")
        1
    """
    kind = pass_kind(p)
    if kind == "module":
        return p(as_module(ir))
    if kind == "function" and isinstance(ir, IRModule):
        def one(f):
            out = p(f)
            if not isinstance(out, PrimFunc):
                raise LoweringError(f"pass '{pass_name(p)}' returned {type(out).__name__}; "
                                    "a function pass must return a PrimFunc")
            return out
        return ir.map_functions(one)
    return p(ir)


class PassContext:
    """Instruments and options for the passes run inside ``with PassContext(...):``.

    ``opt_level``, ``config`` and ``target`` are read by passes through
    ``PassContext.current()``: a pass that depends on the machine (vector width,
    features, memories) reads ``PassContext.current().target``, never the host.
    ``target`` is whatever the caller lowers for (a ``targets.Target`` when lowering
    through ``targets.build`` or ``T.lower(f, target)``); ``None`` means target-blind.
    A nested context without a target inherits the enclosing one's, and the
    enclosing ``config`` entries it does not set itself.  Entering a context when none is active also reads
    ``CUVIL_PASS_TIMING`` / ``CUVIL_DUMP_IR`` (see the module docstring).

    Example::

        >>> with PassContext(opt_level=2, config={"unroll.max_extent": 8}) as ctx:
        ...     PassContext.current().config["unroll.max_extent"]
        8
        >>> with PassContext(target="llvm"):
        ...     with PassContext(opt_level=1):
        ...         PassContext.current().target
        'llvm'
    """

    def __init__(self, instruments=(), opt_level: int = 3, config: dict | None = None,
                 target=None):
        self.instruments = list(instruments)
        self.target = target
        self.opt_level = opt_level
        self.config = dict(config or {})
        self.env_instruments: list = []
        self.outer_instruments: list = []

    @staticmethod
    def current() -> "PassContext":
        """The innermost active context (a fresh default one when none is active)."""
        s = _stack()
        return s[-1] if s else PassContext()

    @staticmethod
    def active() -> bool:
        """Whether some context is entered."""
        return bool(_stack())

    def all_instruments(self) -> list:
        """Enclosing contexts' instruments, this context's own, then those the
        environment asked for."""
        return self.outer_instruments + self.instruments + self.env_instruments

    def __enter__(self) -> "PassContext":
        s = _stack()
        if not s:
            self.env_instruments = env_instruments(os.environ)
        elif self is not s[-1]:
            # a nested context sees the instruments the top level asked for
            self.env_instruments = list(s[0].env_instruments)
        if s and self is not s[-1]:
            # a nested context (e.g. one that only sets the target) still reports to
            # the instruments of the contexts around it; their owners enter/exit them
            self.outer_instruments = s[-1].outer_instruments + s[-1].instruments
            if self.target is None:
                self.target = s[-1].target
            # ... and the options set around it (its own win)
            self.config = {**s[-1].config, **self.config}
        s.append(self)
        for ins in self.instruments + self.env_instruments:
            ins.enter_pass_ctx()
        return self

    def __exit__(self, *exc) -> None:
        try:
            for ins in self.instruments + self.env_instruments:
                ins.exit_pass_ctx()
        finally:
            _stack().pop()


def env_instruments(environ) -> list:
    """The instruments ``CUVIL_PASS_TIMING`` and ``CUVIL_DUMP_IR`` ask for.

    Example::

        >>> [type(i).__name__ for i in env_instruments({"CUVIL_PASS_TIMING": "1"})]
        ['PrintTimingAfterLowering']
    """
    out = []
    if environ.get("CUVIL_PASS_TIMING", "") not in ("", "0"):
        out.append(PrintTimingAfterLowering())
    d = environ.get("CUVIL_DUMP_IR", "")
    if d:
        out.append(DumpIR(d))
    d = environ.get("CUVIL_DUMP_ON_FAIL", "")
    if d:
        out.append(DumpOnFail(d))
    return out


def report_failure(func, name: str, error: BaseException) -> None:
    """Tell the failure instruments of the current context (or of the environment,
    outside any context) that ``name`` failed on ``func``; used by code generators,
    which run after the pass manager.

    Example::

        >>> report_failure("IR", "codegen", ValueError("x"))   # nothing asked for a dump
    """
    found = (PassContext.current().all_instruments() if PassContext.active()
             else env_instruments(os.environ))
    for ins in found:
        ins.run_pass_failed(func, name, error)


class PassManager:
    """Run ``passes`` in order under the current context's instruments (plus its own).

    Example::

        >>> import cuvil_tir as T
        >>> pm = PassManager([lambda f: f.with_attr("k", 1)])
        >>> pm(T.create_prim_func([T.placeholder((2,), name="X")])).attr("k")
        1
    """

    def __init__(self, passes, instruments=()):
        self.passes = list(passes)
        for p in self.passes:
            if not callable(p):
                raise LoweringError(f"PassManager: expected passes PrimFunc -> PrimFunc, "
                                    f"found {p!r}")
        self.instruments = list(instruments)

    def __call__(self, func):
        return self.run(func)

    def run(self, func):
        """Apply every pass to ``func`` (a PrimFunc or an IRModule); instruments see
        each one before and after.  The result is a module once a module pass ran."""
        if not isinstance(func, (PrimFunc, IRModule)):
            raise LoweringError(f"PassManager: expected a PrimFunc or an IRModule, found "
                                f"{type(func).__name__}")
        if not PassContext.active():
            with PassContext():
                return self.run(func)
        ctx = PassContext.current()
        instruments = ctx.all_instruments() + self.instruments
        for ins in self.instruments:
            ins.enter_pass_ctx()
        try:
            for ins in instruments:
                ins.run_begin(func)
            for p in self.passes:
                name = pass_name(p)
                for ins in instruments:
                    ins.run_before_pass(func, name)
                try:
                    out = apply_pass(p, func)
                except Exception as err:
                    for ins in instruments:
                        ins.run_pass_failed(func, name, err)
                    raise
                if not isinstance(out, (PrimFunc, IRModule)):
                    raise LoweringError(f"pass '{name}' returned {type(out).__name__}; a "
                                        "pass must return a PrimFunc (a module pass an "
                                        "IRModule)")
                func = out
                for ins in instruments:
                    ins.run_after_pass(func, name)
            for ins in instruments:
                ins.run_end(func)
        finally:
            for ins in self.instruments:
                ins.exit_pass_ctx()
        return func
