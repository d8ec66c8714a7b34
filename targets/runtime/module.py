"""``Module``: a built function, callable on arrays, with its sources and a timer; and
``NativeCode``, the base of what a kind's ``load`` runs it with.

Calling checks every argument (see :mod:`targets.runtime.argcheck`) and then runs the
native code; outputs are written into the arrays passed.  The module owns its
compiled code: it stays valid as long as the ``Module`` is referenced.  A kind's
``load(program, target)`` returns ``Module(NativeCode subclass, program, target)``.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((3,), name="A")
    >>> B = T.compute((3,), lambda i: A[i] + 1.0, name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]))
    >>> b = np.zeros(3, "float32"); mod(np.ones(3, "float32"), b); b.tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

from cuvil_tir.errors import ArgumentError, TargetError
from cuvil_tir.printer import to_text
from cuvil_tir.target import time_calls

from .argcheck import make_caller
from .profile import profile


class NativeCode:
    """What runs a loaded program: ``entry_name``, ``raw(*checked_args)`` (the native
    call, no checks), ``source_formats`` and ``get_source(fmt)``; ``make_caller`` (how
    arguments are checked: numpy arrays by default) and ``benchmark`` (how calls are
    timed: the host clock by default) are what a GPU runtime replaces.

    Example::

        >>> code = NativeCode("f", lambda *a: None)
        >>> code.entry_name, code.source_formats
        ('f', ())
    """

    source_formats: tuple = ()

    def __init__(self, entry_name: str, raw=None):
        self.entry_name = entry_name
        if raw is not None:
            self.raw = raw

    def get_source(self, fmt: str | None = None) -> str:
        """The source in format ``fmt`` (one of :attr:`source_formats`)."""
        raise TargetError(f"get_source: this module has no source format {fmt!r}")

    def make_caller(self, signature, raw):
        """``call(args)``: check ``args`` against ``signature``, then ``raw(*args)``."""
        return make_caller(signature, raw)

    def benchmark(self, call, repeat: int = 5, number: int | None = None, warmup: int = 1):
        """Time ``call()`` (seconds per call, see ``BenchmarkResult``)."""
        return time_calls(call, repeat=repeat, number=number, warmup=warmup)

    def call_with(self, call, args, options) -> None:
        """``mod(*args, **options)``: a GPU runtime takes ``stream=``; the CPU's none."""
        raise ArgumentError(f"{self.entry_name}: this module's call takes no keyword "
                            f"options, got {', '.join(f'{k}=' for k in sorted(options))} "
                            "(stream= is for cuda modules)")


class Module:
    """A compiled function: ``mod(*arrays)``, ``get_source(fmt)``, ``benchmark(...)``.

    ``mod(*arrays, stream=s)`` (GPU targets) launches on a given stream.
    Attributes: ``entry_name`` (the native symbol), ``program`` (the target's
    :class:`~cuvil_tir.target.Program`), ``lowered`` (the IRModule after the target's
    passes), ``signature``, ``target``, ``runtime`` (the :class:`NativeCode` that runs
    it), ``from_cache`` (whether the compile cache supplied it).

    Example::

        >>> import cuvil_tir as T, targets
        >>> mod = targets.build(T.create_prim_func([T.placeholder((2,), name="X")]), name="noop")
        >>> mod.entry_name
        'noop'
    """

    def __init__(self, runtime: NativeCode, program, target):
        self.runtime = runtime
        self.program = program
        self.source_func = program.source_func
        self.signature = program.signature
        self.target = target
        #: True when this module was loaded from the compile cache (targets.cache)
        self.from_cache = program.from_cache
        self.entry_name = runtime.entry_name
        self._call = runtime.make_caller(self.signature, runtime.raw)

    @property
    def lowered(self):
        """The IRModule after the target's passes (parsed on first use when the module
        came from the compile cache)."""
        return self.program.lowered_module

    def __call__(self, *args, **options) -> None:
        if options:
            self.runtime.call_with(self._call, args, options)
        else:
            self._call(args)

    @property
    def source_formats(self) -> tuple:
        """The formats ``get_source`` accepts (the first is the default)."""
        return tuple(self.runtime.source_formats) + ("tir",)

    def get_source(self, fmt: str | None = None) -> str:
        """Source text: the target's formats (llvm: ``ll`` default, ``ll-opt``, ``asm``)
        or ``"tir"``, the lowered IR.

        Example::

            >>> import cuvil_tir as T, targets
            >>> mod = targets.build(T.create_prim_func([T.placeholder((2,), name="X")]))
            >>> "define i32 @main" in mod.get_source()
            True
        """
        if fmt == "tir":
            return to_text(self.lowered)
        if fmt is not None and fmt not in self.runtime.source_formats:
            raise TargetError(f"get_source: target {self.target.kind!r} has no source "
                              f"format {fmt!r}; expected one of "
                              f"{', '.join(self.source_formats)}")
        return self.runtime.get_source(fmt)

    def benchmark(self, *args, repeat: int = 5, number: int | None = None,
                  warmup: int = 1):
        """Time the native call on ``args`` (checked once, not inside the timing).

        Returns a :class:`~cuvil_tir.target.BenchmarkResult` (seconds per call:
        ``median mean min max std all``).

        Example::

            >>> import numpy as np, cuvil_tir as T, targets
            >>> mod = targets.build(T.create_prim_func([T.placeholder((2,), name="X")]))
            >>> mod.benchmark(np.zeros(2, "float32"), repeat=2, number=3).number
            3
        """
        checked = []

        def capture(*raw_args):
            checked.extend(raw_args)

        self.runtime.make_caller(self.signature, capture)(args)
        raw = self.runtime.raw
        return self.runtime.benchmark(lambda: raw(*checked), repeat=repeat, number=number,
                                      warmup=warmup)

    def profile(self, *args, repeat: int = 5):
        """Time per block (a profiling build of each top-level stage, see
        :mod:`targets.runtime.profile`); returns a ``ProfileResult`` (``.blocks``,
        ``.total``).

        Example::

            >>> import numpy as np, cuvil_tir as T, targets
            >>> A = T.placeholder((8,), name="A")
            >>> mod = targets.build(T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0,
            ...                                                      name="B")]))
            >>> list(mod.profile(np.ones(8, "float32"), np.zeros(8, "float32")).blocks)
            ['B']
        """
        if self.source_func is None:
            raise TargetError("profile: this module was not built from a PrimFunc it kept")
        return profile(self, self.source_func, args, repeat=repeat)

    def __repr__(self) -> str:
        return f"Module({self.signature.describe()}, target={str(self.target)!r})"
