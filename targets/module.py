"""``Module``: a built function, callable on arrays, with its sources and a timer.

Calling checks every argument (see :mod:`targets.argcheck`) and then runs the native
code; outputs are written into the arrays passed.  The module owns its compiled code:
it stays valid as long as the ``Module`` is referenced.

Example::

    >>> import numpy as np, cuvil_tir as T, targets
    >>> A = T.placeholder((3,), name="A")
    >>> B = T.compute((3,), lambda i: A[i] + 1.0, name="B")
    >>> mod = targets.build(T.create_prim_func([A, B]))
    >>> b = np.zeros(3, "float32"); mod(np.ones(3, "float32"), b); b.tolist()
    [2.0, 2.0, 2.0]
"""

from __future__ import annotations

from .argcheck import make_caller
from .benchmark import time_calls


class Module:
    """A compiled function: ``mod(*arrays)``, ``get_source(fmt)``, ``benchmark(...)``.

    Attributes: ``entry_name`` (the native symbol), ``lowered`` (the IRModule after
    the target's passes), ``signature``, ``target``, ``runtime`` (the target's
    runtime module), ``from_cache`` (whether the compile cache supplied it).

    Example::

        >>> import cuvil_tir as T, targets
        >>> mod = targets.build(T.create_prim_func([T.placeholder((2,), name="X")]), name="noop")
        >>> mod.entry_name
        'noop'
    """

    def __init__(self, runtime, signature, lowered, target, source_func=None):
        self.runtime = runtime
        self.source_func = source_func
        self.signature = signature
        self._lowered = lowered
        self.target = target
        #: True when this module was loaded from the compile cache (targets.cache)
        self.from_cache = False
        self.entry_name = runtime.entry_name
        # a runtime may check its own kind of arrays (GPU arrays for cuda)
        self._make_caller = getattr(runtime, "make_caller", make_caller)
        self._call = self._make_caller(signature, runtime.raw)

    @property
    def lowered(self):
        """The IRModule after the target's passes (parsed on first use when the module
        came from the compile cache)."""
        if callable(self._lowered):
            self._lowered = self._lowered()
        return self._lowered

    def __call__(self, *args) -> None:
        self._call(args)

    def __getattr__(self, name):
        # what only some runtimes have: an accelerator's mod.stats and mod.memory_map()
        runtime = self.__dict__.get("runtime")
        if name.startswith("_") or runtime is None:
            raise AttributeError(name)
        return getattr(runtime, name)

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
            from cuvil_tir.printer import to_text
            return to_text(self.lowered)
        if fmt is not None and fmt not in self.runtime.source_formats:
            from cuvil_tir.errors import TargetError
            raise TargetError(f"get_source: target {self.target.kind!r} has no source "
                              f"format {fmt!r}; expected one of "
                              f"{', '.join(self.source_formats)}")
        return self.runtime.get_source(fmt)

    def benchmark(self, *args, repeat: int = 5, number: int | None = None,
                  warmup: int = 1):
        """Time the native call on ``args`` (checked once, not inside the timing).

        Returns a :class:`targets.benchmark.BenchmarkResult` (seconds per call:
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

        self._make_caller(self.signature, capture)(args)
        raw = self.runtime.raw
        timer = getattr(self.runtime, "benchmark", None)
        if timer is not None:       # device timing (CUDA events)
            return timer(lambda: raw(*checked), repeat=repeat, number=number,
                         warmup=warmup)
        return time_calls(lambda: raw(*checked), repeat=repeat, number=number,
                          warmup=warmup)

    def profile(self, *args, repeat: int = 5):
        """Time per block (a profiling build of each top-level stage, see
        :mod:`targets.profile`); returns a ``ProfileResult`` (``.blocks``, ``.total``).

        Example::

            >>> import numpy as np, cuvil_tir as T, targets
            >>> A = T.placeholder((8,), name="A")
            >>> mod = targets.build(T.create_prim_func([A, T.compute((8,), lambda i: A[i] + 1.0,
            ...                                                      name="B")]))
            >>> list(mod.profile(np.ones(8, "float32"), np.zeros(8, "float32")).blocks)
            ['B']
        """
        from .profile import profile
        if self.source_func is None:
            from cuvil_tir.errors import TargetError
            raise TargetError("profile: this module was not built from a PrimFunc it kept")
        return profile(self, self.source_func, args, repeat=repeat)

    def __repr__(self) -> str:
        return f"Module({self.signature.describe()}, target={str(self.target)!r})"
