"""``TargetKind``: the backend contract.  A kind declares its data and its steps; the
build driver (:func:`cuvil_tir.target.build`), ``T.lower``, the compile cache and the
tuner read nothing else.

Declared data (class attributes; every one has a default here):

* ``name`` -- what users pass to ``Target`` / ``build`` (required);
* ``options`` -- ``{name: Option}``, checked when a ``Target`` is made;
* ``memories`` -- the memory table (:class:`~cuvil_tir.target.memory.Memory`: scope,
  capacity, banks, access width, alignment); default: the host's ``global`` and
  ``local``;
* ``axes`` -- the parallel axes code can be spread over, with their limits
  (:class:`~cuvil_tir.thread_axes.ThreadAxis`, also exported as ``Axis``: GPU blocks
  and threads, accelerator cores); ``max_threads`` -- the most ``thread``-level
  iterations one block runs (None: no limit); default: none;
* ``op_spellings`` -- the name of the op registry's spelling table this backend writes
  its ops from (:mod:`cuvil_tir.ops.spelling`: ``"llvm"``, ``"c"``, ``"cuda"``; the
  backend fills it from its own folder); ``None`` for a backend that writes none;
* ``calling_conventions`` -- the kinds of functions its lowering produces (``host``,
  ``parallel_task``, ``device_kernel``).

Steps (methods):

* ``pipeline(target) -> passes`` -- the lowering passes (default: the default
  pipeline);
* ``codegen(module, target) -> Program`` -- the lowered IRModule as a
  :class:`~cuvil_tir.target.program.Program` (required);
* ``load(program, target) -> Module`` -- the runnable module (required);
* ``memories_for(target) -> memories`` -- the memory table of one target, for a kind
  whose capacities depend on its options (a GPU's shared memory on its
  architecture); default: ``memories``;
* ``machine(target) -> Machine`` -- vector width, registers, caches and cores that
  schedules are sized for (default: a scalar, single-core machine);
* ``measure(module, args, min_repeat_seconds)`` -- the cost of one call on numpy
  ``args``, for the tuner (default: the median of timed calls on this host);
* ``call_host(module, arrays)`` -- run ``module`` on numpy ``arrays``, its outputs
  written back into them, for the tuner's checks (default: ``module(*arrays)``; a
  device kind copies them to the device and back);
* ``tuning_space(func, target)`` -- a schedule function the tuner searches when the
  user gives none (default ``None``: the tuner's generated space);
* ``describe(target)``, ``tool_versions(target)``, ``cache_identity(target)`` -- what
  the code depends on, for build keys and the compile cache.

Example::

    >>> class Tiny(TargetKind):
    ...     name = "doc-tiny"
    ...     options = {"opt_level": Option(2, int, min=0, max=3)}
    >>> [m.scope for m in Tiny.memories], Tiny.calling_conventions
    (['global', 'local'], ('host',))
"""

from __future__ import annotations

from dataclasses import dataclass

import cuvil_tir

from .. import dtype as D
from .. import ops
from ..errors import TargetError
from ..thread_axes import ThreadAxis
from ..transform.pipeline import default_pipeline
from .memory import HOST_MEMORIES
from .options import Option  # noqa: F401 - the doctest's kind declares one
from .timing import time_calls

#: how many rounds :meth:`TargetKind.measure` times (the tuner's default)
MEASURE_REPEAT = 5


@dataclass(frozen=True)
class Machine:
    """What a target's code runs on, as schedules and the tuner size tiles for it:
    vector width and registers, L1d and L2 bytes per core, cores, and the CPU's
    ``name`` and ``features`` when it has them.

    Example::

        >>> Machine(256, 16, 32768, 1 << 20, 2).lanes("float32")
        8
    """

    vector_bits: int
    vector_registers: int
    l1d_bytes: int
    l2_bytes: int
    cores: int
    name: str = ""
    features: tuple = ()

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` per vector register."""
        return max(1, self.vector_bits // D.bits(D.element(str(dtype))))


#: the machine of a kind that describes none: scalar, one core, caches unbounded
SCALAR_MACHINE = Machine(32, 1, 1 << 30, 1 << 30, 1, "scalar")


#: a kind's axes are thread axes (the IR's vocabulary, :mod:`cuvil_tir.thread_axes`)
#: with the kind's limits: ``Axis("threadIdx.x", "thread", 0, limit=1024)``
Axis = ThreadAxis


class TargetKind:
    """Base class of every target kind (module doc); subclass it, set ``name``, write
    ``codegen`` and ``load``, and register an instance with
    :func:`cuvil_tir.target.register_target`.

    Example::

        >>> TargetKind.memories == HOST_MEMORIES, TargetKind.axes
        (True, ())
    """

    name: str = ""
    doc: str = ""
    options: dict = {}
    memories: tuple = HOST_MEMORIES
    axes: tuple = ()
    max_threads: int | None = None
    op_spellings: str | None = None
    calling_conventions: tuple = ("host",)

    # ---- steps --------------------------------------------------------------------
    def pipeline(self, target) -> list:
        """The lowering passes for ``target`` (default: the default pipeline)."""
        return default_pipeline()

    def codegen(self, module, target):
        """The lowered ``module`` (an IRModule) as a ``Program``; every kind writes
        its own."""
        raise TargetError(f"target kind {self.name!r} has no codegen: a TargetKind "
                          "defines codegen(module, target) -> Program")

    def load(self, program, target):
        """A runnable module of ``program``; every kind writes its own."""
        raise TargetError(f"target kind {self.name!r} has no load: a TargetKind "
                          "defines load(program, target) -> Module")

    def spelling(self, op: str):
        """How this backend writes ``op``: its entry in the spelling table named by
        :attr:`op_spellings` (a ``CodegenError`` naming the op when it has none).

        Example::

            >>> from cuvil_tir.target import get_target_kind
            >>> get_target_kind("c").spelling("sqrt")
            'sqrt{f}({0})'
        """
        if self.op_spellings is None:
            raise TargetError(f"target kind {self.name!r} declares no op spelling table "
                              "(op_spellings)")
        return ops.spelling(self.op_spellings, op)

    def memories_for(self, target) -> tuple:
        """The memory table of ``target`` (default: :attr:`memories`); a kind whose
        capacities depend on the target's options overrides it, and everything that
        sizes by a capacity (the memory planner, the lowering's checks, the tuner's
        rules) reads it here.

        Example::

            >>> from cuvil_tir.target import Target
            >>> TargetKind().memories_for(Target("llvm")) == HOST_MEMORIES
            True
        """
        return self.memories

    def machine(self, target) -> Machine:
        """What code for ``target`` runs on (default: :data:`SCALAR_MACHINE`)."""
        return SCALAR_MACHINE

    def measure(self, module, args, min_repeat_seconds: float = 0.0) -> tuple:
        """``(seconds per call, how it was measured)`` of ``module`` on ``args``, for
        the tuner: by default the median of :data:`MEASURE_REPEAT` timed rounds on
        this host, each round long enough to last ``min_repeat_seconds``."""
        res = time_calls(lambda: module(*args), repeat=MEASURE_REPEAT, number=None,
                         warmup=1, min_repeat_seconds=min_repeat_seconds)
        return res.median, f"median of {MEASURE_REPEAT} rounds of {res.number}"

    def call_host(self, module, arrays) -> None:
        """Run ``module`` on the numpy ``arrays``, its outputs written back into them
        (the tuner's reference and checks); by default ``module(*arrays)``."""
        module(*arrays)

    def tuning_space(self, func, target):
        """A schedule function ``space(sch)`` the tuner searches for ``func`` when the
        user gives none; ``None`` (the default) leaves it to the tuner's rules."""
        return None

    def describe(self, target) -> dict:
        """What code for ``target`` depends on, as plain values (build keys): by
        default the kind's name and every option."""
        return {"kind": self.name, "options": dict(target.options)}

    def tool_versions(self, target) -> dict:
        """Versions of the tools that decide the code (build keys): Cuvil's, and each
        kind adds its compiler's."""
        return {"cuvil": cuvil_tir.__version__}

    def cache_identity(self, target) -> str:
        """What else decides a compiled program beyond :meth:`describe` and
        :meth:`tool_versions` (the compile cache's key): default nothing."""
        return ""

    def __repr__(self) -> str:
        return f"<target kind {self.name!r}>"


__all__ = ["Axis", "MEASURE_REPEAT", "Machine", "SCALAR_MACHINE", "TargetKind"]
